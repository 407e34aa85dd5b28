"""Making the ``regex`` module split text exactly like tiktoken's or Hugging Face's regex engine.

The same pattern means different chunks in different engines when their Unicode
tables differ: with ``regex`` 2026.11 about 17,500 code points (recent CJK
extensions such as U+323B0..U+33479, U+3DEC5) are letters, while tiktoken's Rust
``regex`` tables and Hugging Face's Oniguruma still call them unassigned. So
``'\\U0008a1f8\\U0003dec5$j'`` gives cl100k ids ``3, 73`` in tiktoken and ``76744``
through a plain ``regex`` split.

The vocabulary's file format says whose reading is the truth (tiktoken's for rank
files, Hugging Face's for ``tokenizer.json``). :func:`dialect_pattern` rewrites a
pattern for the ``regex`` module so that every character class in it matches
exactly the code points the truth engine matches: each class ``C`` that depends
on Unicode tables (``\\p{..}``, ``\\s``, ``\\w``, ``\\d`` and their negations,
bracket classes holding them) is probed in both engines over every code point
either engine considers assigned (code points unassigned in both have no
properties anywhere, so they agree), and where the sets differ ``C`` becomes
``(?:(?![removed])C|[added])``. Probing costs about a second per pattern and
engine, once per process; an engine that is not installed leaves the pattern
unchanged (there is nothing to agree with).

Example::

    >>> dialect_pattern(r"\\p{L}+", "tiktoken")  # doctest: +SKIP
    '(?:(?![\\U00031350-\\U000323af...])\\p{L})+'
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

import numpy as np
import regex

__all__ = ["ENGINES", "Engine", "contains_any", "dialect_pattern", "dialect_trigger", "table_atoms"]

Engine = Literal["tiktoken", "huggingface"]
ENGINES: tuple[Engine, ...] = ("tiktoken", "huggingface")

# Escapes whose meaning comes from Unicode tables, and a bracket class holding one.
_TABLE_ESCAPE = regex.compile(r"\\(?:[pP]\{[^}]*\}|[pP][A-Za-z]|[sSwWdD])")
_SCANNER = regex.compile(
    r"""\\(?:[pPx]\{[^}]*\}|[pP].|.)      # an escape
      | \[\^?\]?(?:\\.|\[:[a-z]+:\]|[^\]\\])*\]   # a bracket class
      | .""",
    regex.VERBOSE | regex.DOTALL,
)


def table_atoms(pattern: str) -> list[tuple[int, int]]:
    """Spans of the character classes in ``pattern`` whose meaning depends on Unicode tables."""
    spans = []
    for m in _SCANNER.finditer(pattern):
        token = m.group()
        if len(token) > 1 and (token[0] == "[" or token[0] == "\\") and _TABLE_ESCAPE.search(token):
            spans.append(m.span())
    return spans


def _codepoints(text: str) -> np.ndarray:
    # surrogatepass: a lone surrogate is refused later, by the encoder, with its own code.
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


def _text(points: np.ndarray) -> str:
    return points.astype("<u4").tobytes().decode("utf-32-le")


@lru_cache(maxsize=1)
def _every_codepoint() -> np.ndarray:
    points = np.arange(0x110000, dtype=np.uint32)
    return points[(points < 0xD800) | (points > 0xDFFF)]  # surrogates have no UTF-8


def _ours(atom: str, points: np.ndarray) -> np.ndarray:
    found = regex.findall(f"(?:{atom})+", _text(points))
    return _codepoints("".join(found))


def _tiktoken(atom: str, points: np.ndarray) -> np.ndarray:
    import tiktoken

    byte_ranks = {bytes([b]): b for b in range(256)}
    enc = tiktoken.Encoding(
        "probe", pat_str=f"(?:{atom})+", mergeable_ranks=byte_ranks, special_tokens={}
    )
    # tiktoken encodes matches only: the bytes that come back are the matched characters.
    return _codepoints(enc.decode_bytes(enc.encode_ordinary(_text(points))).decode("utf-8"))


def _huggingface(atom: str, points: np.ndarray) -> np.ndarray:
    from tokenizers import Regex, pre_tokenizers

    from tokembed.tokenizer.formats._onig import to_onig

    split = pre_tokenizers.Split(Regex(to_onig(f"(?:{atom})+")), behavior="removed")
    kept = "".join(piece for piece, _ in split.pre_tokenize_str(_text(points)))
    return np.setdiff1d(points, _codepoints(kept), assume_unique=True)


_PROBES = {"tiktoken": _tiktoken, "huggingface": _huggingface}


@lru_cache(maxsize=4)
def _assigned_somewhere(engine: Engine) -> np.ndarray:
    """Code points that ``regex`` or ``engine`` considers assigned (the others agree)."""
    every = _every_codepoint()
    unassigned = np.intersect1d(
        _ours(r"\p{Cn}", every), _PROBES[engine](r"\p{Cn}", every), assume_unique=True
    )
    return np.setdiff1d(every, unassigned, assume_unique=True)


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
def _atom_rewrite(atom: str, engine: Engine) -> tuple[str, np.ndarray]:
    """The atom as ``regex`` must read it, and the code points where the engines differ."""
    points = _assigned_somewhere(engine)
    try:
        ours = _ours(atom, points)
        theirs = _PROBES[engine](atom, points)
    except (regex.error, ValueError):
        # The atom cannot stand alone (a class the atom finder cut from an unusual user
        # pattern, or one the other engine cannot compile): keep the text as written,
        # which is what the whole pattern already compiled to.
        return atom, np.empty(0, dtype=np.uint32)
    added = np.setdiff1d(theirs, ours, assume_unique=True)
    removed = np.setdiff1d(ours, theirs, assume_unique=True)
    differ = np.union1d(added, removed)
    if differ.size == 0:
        return atom, differ
    body = f"(?![{_ranges(removed)}]){atom}" if removed.size else atom
    return (f"(?:{body}|[{_ranges(added)}])" if added.size else f"(?:{body})"), differ


def _agreeing_atom(atom: str, engine: Engine) -> str:
    return _atom_rewrite(atom, engine)[0]


@lru_cache(maxsize=64)
def dialect_trigger(pattern: str, engine: Engine) -> np.ndarray:
    """The sorted code points on which ``pattern`` and its rewrite may match differently.

    A text containing none of them splits identically under both, so callers can
    keep the (faster) original pattern for it; empty when they never differ.
    """
    if dialect_pattern(pattern, engine) == pattern:
        return np.empty(0, dtype=np.uint32)
    differ = [_atom_rewrite(pattern[a:b], engine)[1] for a, b in table_atoms(pattern)]
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
def dialect_pattern(pattern: str, engine: Engine) -> str:
    """``pattern`` rewritten so that ``regex`` matches like ``engine`` on every code point.

    Returns ``pattern`` itself when the engines agree already or ``engine``'s
    library is not installed. Case-insensitive literals (``(?i:'s)``) are left
    as they are: simple case folding of ASCII letters is the same everywhere.
    """
    try:
        if engine == "tiktoken":
            import tiktoken  # noqa: F401
        else:
            import tokenizers  # noqa: F401
    except ImportError:
        return pattern
    out, pos = [], 0
    for start, end in table_atoms(pattern):
        out += [pattern[pos:start], _agreeing_atom(pattern[start:end], engine)]
        pos = end
    out.append(pattern[pos:])
    return "".join(out)
