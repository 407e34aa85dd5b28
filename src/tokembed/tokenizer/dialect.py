"""Whose regex reading splits text: making the ``regex`` module match like tiktoken or Hugging Face.

The same pattern means different chunks in different engines when their Unicode tables
differ: with ``regex`` 2026.11 about 17,500 code points (recent CJK extensions such as
U+323B0..U+33479, U+3DEC5) are letters, while tiktoken's Rust ``regex`` tables and Hugging
Face's Oniguruma still call them unassigned. So ``'\\U0008a1f8\\U0003dec5$j'`` gives cl100k ids
``3, 73`` in tiktoken and ``76744`` through a plain ``regex`` split.

A pre-tokenizer's *dialect* says whose reading is the truth: ``"tiktoken"`` (rank files,
and the default for training) or ``"huggingface"`` (``tokenizer.json``). The code points
each dialect gives every Unicode general category (``\\p{Lu}``, ``\\p{L}``, ``\\p{L&}``, ...)
and ``\\s``, ``\\w``, ``\\d`` come from tables generated from the engines themselves
(``_unicode_tables.py``, written by ``_gen_tables.py``; nothing is probed at run
time and neither tiktoken nor ``tokenizers`` is imported). :func:`dialect_pattern` rewrites
each character class of a pattern that depends on Unicode tables (those escapes, their
negations ``\\P{..}``, ``\\S``, ``\\W``, ``\\D``, and bracket classes built from them, literal
characters and ranges) so that ``regex`` matches exactly the dialect's code points: where
the two sets differ, class ``C`` becomes ``(?:(?![removed])C|[added])``.

A class the tables do not describe (a script such as ``\\p{Greek}``, a long property name
such as ``\\p{Letter}``, the brace-less ``\\pL``, which Oniguruma does not read as a category,
a binary property, a nested set) is left as written: it matches as
the installed ``regex`` module reads it, which may differ from the dialect's engine on code
points assigned in recent Unicode versions.

Example::

    >>> dialect_pattern(r"\\p{L}+", "tiktoken")  # doctest: +SKIP
    '(?:(?![\\U00031350-\\U000323af...])\\p{L})+'
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Literal

import numpy as np
import regex

from tokembed.tokenizer import _unicode_tables

__all__ = [
    "DIALECTS",
    "Dialect",
    "class_members",
    "clear_caches",
    "contains_any",
    "dialect_pattern",
    "dialect_trigger",
    "table_atoms",
]

Dialect = Literal["tiktoken", "huggingface"]
DIALECTS: tuple[Dialect, ...] = ("tiktoken", "huggingface")

_NCODE = 0x110000
# Escapes whose meaning comes from Unicode tables, and a bracket class holding one.
_TABLE_ESCAPE = regex.compile(r"\\(?:[pP]\{[^}]*\}|[pP][A-Za-z]|[sSwWdD])")
_SCANNER = regex.compile(
    r"""\\(?:[pPx]\{[^}]*\}|[pP].|.)      # an escape
      | \[\^?\]?(?:\\.|\[:[a-z]+:\]|[^\]\\])*\]   # a bracket class
      | .""",
    regex.VERBOSE | regex.DOTALL,
)
# One item of a class: a table escape, a code point written as an escape, or a character.
_ITEM = regex.compile(
    r"""\\(?P<prop>[pP])\{(?P<name>[^}]*)\}
      | \\(?P<esc>[sSwWdD])
      | \\(?:x\{(?P<hexb>[0-9A-Fa-f]{1,6})\}|x(?P<hex>[0-9A-Fa-f]{2})|u(?P<u4>[0-9A-Fa-f]{4})
             |U(?P<u8>[0-9A-Fa-f]{8}))
      | \\(?P<ctl>[afnrtv])
      | \\(?P<lit>[^A-Za-z0-9])
      | (?P<char>[^\\\[])""",
    regex.VERBOSE | regex.DOTALL,
)
_CONTROLS = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
# Compound general categories: L& (also LC) is the cased letters.
_CASED = ("Lu", "Ll", "Lt")


def table_atoms(pattern: str) -> list[tuple[int, int]]:
    """Spans of the character classes in ``pattern`` whose meaning depends on Unicode tables."""
    spans = []
    for m in _SCANNER.finditer(pattern):
        token = m.group()
        if len(token) > 1 and (token[0] == "[" or token[0] == "\\") and _TABLE_ESCAPE.search(token):
            spans.append(m.span())
    return spans


@cache
def _surrogate() -> np.ndarray:
    mask = np.zeros(_NCODE, dtype=bool)
    mask[0xD800:0xE000] = True
    return mask


@cache
def _categories(dialect: Dialect) -> tuple[np.ndarray, dict[str, int]]:
    """The general category of every code point (an index into the names), as ``dialect`` reads it."""
    runs = _unicode_tables.CATEGORY_RUNS[dialect].split()
    starts = np.array([int(s, 16) for s in runs[0::2]], dtype=np.int64)
    names = runs[1::2]
    index = {name: k for k, name in enumerate(sorted(set(names)))}
    lengths = np.diff(np.append(starts, _NCODE))
    of = np.repeat(np.array([index[n] for n in names], dtype=np.uint8), lengths)
    return of, index


def _ranges_mask(text: str) -> np.ndarray:
    mask = np.zeros(_NCODE, dtype=bool)
    for item in text.split():
        first, _, last = item.partition("-")
        mask[int(first, 16) : int(last or first, 16) + 1] = True
    return mask


@lru_cache(maxsize=128)
def _named(name: str, dialect: Dialect, *, in_class: bool = False) -> np.ndarray | None:
    """Code points of a general category (``Lu``, ``L``, ``L&``) or ``s``/``w``/``d``, or None.

    ``in_class``: an escape inside a bracket class, which Oniguruma reads differently for ``\\w``.
    """
    if name in ("s", "w", "d"):
        escapes = _unicode_tables.ESCAPES[dialect]
        return _ranges_mask(escapes.get(f"[{name}]", escapes[name]) if in_class else escapes[name])
    of, index = _categories(dialect)
    if name in ("L&", "LC"):
        wanted = [index[c] for c in _CASED]
    elif name in index:
        wanted = [index[name]]
    elif len(name) == 1 and name.isupper():
        wanted = [k for c, k in index.items() if c[0] == name]
    else:
        return None
    return np.isin(of, wanted) if wanted else None


def _item_mask(m: regex.Match[str], dialect: Dialect, *, in_class: bool) -> np.ndarray | int | None:
    """One class item: a mask of code points, a single code point, or None (not in the tables)."""
    if m["prop"]:
        found = _named(m["name"], dialect)
        return None if found is None else (~found if m["prop"] == "P" else found)
    if m["esc"]:
        found = _named(m["esc"].lower(), dialect, in_class=in_class)
        return None if found is None else (~found if m["esc"].isupper() else found)
    digits = m["hexb"] or m["hex"] or m["u4"] or m["u8"]
    if digits:
        return int(digits, 16)
    if m["ctl"]:
        return _CONTROLS[m["ctl"]]
    return ord(m["lit"] or m["char"])


def _bracket_mask(body: str, dialect: Dialect) -> np.ndarray | None:
    """The code points of a bracket class's body (without ``[``/``^``/``]``), or None."""
    items: list[np.ndarray | int | str] = []
    pos = 0
    if body.startswith("]"):  # a leading ']' is literal
        items.append(ord("]"))
        pos = 1
    while pos < len(body):
        m = _ITEM.match(body, pos)
        if m is None:
            return None  # a nested set, a back-reference...: leave the class as written
        item = _item_mask(m, dialect, in_class=True)
        if item is None:
            return None
        items.append("-" if m["char"] == "-" else item)
        pos = m.end()
    mask = np.zeros(_NCODE, dtype=bool)
    k = 0
    while k < len(items):
        one = items[k]
        nxt = items[k + 2] if k + 2 < len(items) else None
        dash = k + 2 < len(items) and isinstance(items[k + 1], str)  # a final '-' is literal
        if isinstance(one, int) and dash:
            if not isinstance(nxt, int):
                return None  # a range to a class: regex refuses or reads it its own way
            mask[one : nxt + 1] = True
            k += 3
            continue
        if isinstance(one, str):
            mask[ord(one)] = True
        elif isinstance(one, int):
            mask[one] = True
        else:
            mask |= one
        k += 1
    return mask


def clear_caches() -> None:
    """Forget what was read from the tables (after ``_unicode_tables`` was regenerated)."""
    for cached in (_categories, _named, _atom_rewrite, dialect_trigger, dialect_pattern):
        cached.cache_clear()


def class_members(atom: str, dialect: Dialect) -> np.ndarray | None:
    """The sorted code points (no surrogates) that the class ``atom`` matches in ``dialect``,
    by the generated tables; None for a class they do not describe (see the module docstring).

    Example::

        >>> class_members(r"\\d", "tiktoken")[:3].tolist()
        [48, 49, 50]
    """
    if atom.startswith("["):
        negated = atom.startswith("[^")
        mask = _bracket_mask(atom[2 if negated else 1 : -1], dialect)
        if mask is not None and negated:
            mask = ~mask
    else:
        m = _ITEM.fullmatch(atom)
        escape = m is not None and (m["prop"] or m["esc"])
        item = _item_mask(m, dialect, in_class=False) if escape and m is not None else None
        mask = item if isinstance(item, np.ndarray) else None
    if mask is None:
        return None
    return np.flatnonzero(mask & ~_surrogate()).astype(np.uint32)


def _codepoints(text: str) -> np.ndarray:
    # surrogatepass: a lone surrogate is refused later, by the encoder, with its own code.
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


@cache
def _every_text() -> str:
    points = np.arange(_NCODE, dtype=np.uint32)
    points = points[(points < 0xD800) | (points > 0xDFFF)]  # surrogates have no UTF-8
    return points.astype("<u4").tobytes().decode("utf-32-le")


def _regex_members(atom: str) -> np.ndarray:
    """The code points the installed ``regex`` module matches with ``atom`` (about 20 ms)."""
    return _codepoints("".join(regex.findall(f"(?:{atom})+", _every_text())))


def _ranges(points: np.ndarray) -> str:
    """A bracket-class body listing ``points`` (sorted) as ranges of escapes."""
    if points.size == 0:
        return ""
    breaks = np.flatnonzero(np.diff(points) != 1)
    starts = np.concatenate(([points[0]], points[breaks + 1]))
    ends = np.concatenate((points[breaks], [points[-1]]))
    return "".join(
        f"\\U{s:08x}" if s == e else f"\\U{s:08x}-\\U{e:08x}"
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    )


@lru_cache(maxsize=256)
def _atom_rewrite(atom: str, dialect: Dialect) -> tuple[str, np.ndarray]:
    """The atom as ``regex`` must read it, and the code points where the readings differ."""
    theirs = class_members(atom, dialect)
    if theirs is None:
        return atom, np.empty(0, dtype=np.uint32)
    try:
        ours = _regex_members(atom)
    except regex.error:
        # The atom cannot stand alone (a class the atom finder cut from an unusual user
        # pattern): keep the text as written, which is what the whole pattern compiled to.
        return atom, np.empty(0, dtype=np.uint32)
    added = np.setdiff1d(theirs, ours, assume_unique=True)
    removed = np.setdiff1d(ours, theirs, assume_unique=True)
    differ = np.union1d(added, removed)
    if differ.size == 0:
        return atom, differ
    body = f"(?![{_ranges(removed)}]){atom}" if removed.size else atom
    return (f"(?:{body}|[{_ranges(added)}])" if added.size else f"(?:{body})"), differ


@lru_cache(maxsize=64)
def dialect_trigger(pattern: str, dialect: Dialect) -> np.ndarray:
    """The sorted code points on which ``pattern`` and its rewrite may match differently.

    A text containing none of them splits identically under both, so callers can
    keep the (faster) original pattern for it; empty when they never differ.
    """
    if dialect_pattern(pattern, dialect) == pattern:
        return np.empty(0, dtype=np.uint32)
    differ = [_atom_rewrite(pattern[a:b], dialect)[1] for a, b in table_atoms(pattern)]
    return np.unique(np.concatenate(differ)).astype(np.uint32) if differ else np.empty(0, np.uint32)


def contains_any(text: str, points: np.ndarray) -> bool:
    """True when ``text`` contains one of the sorted code points ``points``."""
    if points.size == 0 or not text:
        return False
    codes = _codepoints(text)
    codes = codes[codes >= points[0]]  # most text lies below the first differing point
    if codes.size == 0:
        return False
    at = np.searchsorted(points, codes)
    at[at == points.size] = 0
    return bool((points[at] == codes).any())


@lru_cache(maxsize=64)
def dialect_pattern(pattern: str, dialect: Dialect) -> str:
    """``pattern`` rewritten so that ``regex`` matches like ``dialect`` on every code point.

    Returns ``pattern`` itself when the readings agree already. Case-insensitive literals
    (``(?i:'s)``) are left as they are: simple case folding of ASCII letters is the same
    everywhere.
    """
    out, pos = [], 0
    for start, end in table_atoms(pattern):
        out += [pattern[pos:start], _atom_rewrite(pattern[start:end], dialect)[0]]
        pos = end
    out.append(pattern[pos:])
    return "".join(out)
