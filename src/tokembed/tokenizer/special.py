"""Special tokens: assigning ids to names, and tiktoken's encode-time policy.

A special token is a name (e.g. ``<|endoftext|>``) bound to an id that no byte
piece uses. Several names may share an id (an alias, like o200k_harmony's
``<|endofprompt|>``/``<|reserved_200018|>``). Encoding follows tiktoken:

* names in ``allowed_special`` found in the text become their id;
* names in ``disallowed_special`` (default: every registered name not allowed)
  found in the text raise SPECIAL_TOKEN_DISALLOWED;
* other text, including the spelling of a name that is neither, is ordinary text.

Example::

    >>> assign_special_ids({"<|a|>": None, "<|b|>": 7}, first_free=6)
    {'<|a|>': 6, '<|b|>': 7}
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Set
from functools import lru_cache
from typing import Literal

import regex

from tokembed.errors import DisallowedSpecialError, TokenizerError

__all__ = [
    "SpecialSet",
    "aliases",
    "assign_special_ids",
    "find_disallowed",
    "reserved_ids",
    "split_on_specials",
]

SpecialSet = Set[str] | Literal["all"]


def assign_special_ids(specials: Mapping[str, int | None], *, first_free: int) -> dict[str, int]:
    """Explicit ids kept; names given ``None`` get ids from ``first_free`` on, in order.

    Automatic ids skip ids that are already taken by an explicit name.
    """
    taken = {sid for sid in specials.values() if sid is not None}
    out: dict[str, int] = {}
    nxt = first_free
    for name, sid in specials.items():
        if sid is None:
            while nxt in taken:
                nxt += 1
            sid = nxt
            taken.add(nxt)
        out[name] = sid
    return out


def aliases(specials: Mapping[str, int]) -> dict[int, tuple[str, ...]]:
    """Ids that carry more than one name, with their names in registration order."""
    names: dict[int, list[str]] = {}
    for name, sid in specials.items():
        names.setdefault(sid, []).append(name)
    return {sid: tuple(ns) for sid, ns in names.items() if len(ns) > 1}


def reserved_ids(specials: Mapping[str, int]) -> set[int]:
    """Special ids every name of which holds ``reserved`` (placeholders such as
    o200k_harmony's ``<|reserved_200000|>``): the ids a new special may take over.

    Example::

        >>> sorted(reserved_ids({"<|end|>": 7, "<|reserved_8|>": 8, "<|x|>": 9, "<|reserved_9|>": 9}))
        [8]
    """
    names: dict[int, list[str]] = {}
    for name, sid in specials.items():
        names.setdefault(sid, []).append(name)
    return {sid for sid, ns in names.items() if all("reserved" in n.lower() for n in ns)}


def _resolve(which: SpecialSet, registered: Mapping[str, int], arg: str) -> frozenset[str]:
    if which == "all":
        return frozenset(registered)
    chosen = frozenset(which)
    unknown = sorted(chosen - registered.keys())
    if unknown:
        raise TokenizerError(
            "UNKNOWN_SPECIAL_TOKEN",
            f"{arg} names {unknown[0]!r}, which is not a registered special token",
            value=unknown[0],
            fix=f"use one of the tokenizer's special tokens ({len(registered)} registered) or 'all'",
        )
    return chosen


@lru_cache(maxsize=64)  # encode() runs this per call; o200k_harmony has 1,091 names
def _alternation(names: frozenset[str]) -> regex.Pattern[str]:
    # Longest first so that a name that is a prefix of another never shadows it.
    ordered = sorted(names, key=lambda s: (-len(s), s))
    return regex.compile("|".join(regex.escape(n) for n in ordered))


def find_disallowed(
    text: str,
    registered: Mapping[str, int],
    *,
    allowed_special: SpecialSet,
    disallowed_special: SpecialSet,
) -> frozenset[str]:
    """The allowed names, after raising if a disallowed name's spelling occurs in ``text``.

    Raises:
        DisallowedSpecialError(SPECIAL_TOKEN_DISALLOWED): names the first such spelling
            (also a ``ValueError``, as in tiktoken).
        TokenizerError(UNKNOWN_SPECIAL_TOKEN): an argument names an unregistered token.
    """
    allowed = _resolve(allowed_special, registered, "allowed_special")
    if disallowed_special == "all":
        disallowed = frozenset(registered) - allowed
    else:
        disallowed = _resolve(disallowed_special, registered, "disallowed_special")
    if disallowed:
        match = _alternation(frozenset(disallowed)).search(text)
        if match is not None:
            name = match.group()
            raise DisallowedSpecialError(
                "SPECIAL_TOKEN_DISALLOWED",
                f"text contains the special token {name!r} at offset {match.start()}",
                value=name,
                fix=(
                    f"pass allowed_special={{{name!r}}} (or 'all') to encode it as its id, "
                    "or disallowed_special=() to encode it as ordinary text"
                ),
            )
    return allowed


def split_on_specials(text: str, allowed: Set[str]) -> Iterator[tuple[str, bool]]:
    """``(segment, is_special)`` pairs covering ``text``; ordinary segments are never empty."""
    if not allowed:
        if text:
            yield text, False
        return
    pos = 0
    for m in _alternation(frozenset(allowed)).finditer(text):
        if m.start() > pos:
            yield text[pos : m.start()], False
        yield m.group(), True
        pos = m.end()
    if pos < len(text):
        yield text[pos:], False
