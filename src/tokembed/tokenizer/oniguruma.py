"""Translating pre-tokenizer regexes between Python's ``regex`` and Oniguruma (Hugging Face).

The two engines read a few constructs differently, and each difference
changes chunks (checked with ``tokenizers`` 0.23):

========================  ==============================  ==============================
construct                 ``regex`` (ours, tiktoken)      Oniguruma (HF ``Split``)
========================  ==============================  ==============================
``X{1,3}+``               possessive ``X{1,3}``           ``(X{1,3})+`` — repeated!
``$`` (no flags)          end, or before a final ``\\n``   end of *any* line
``\\Z``                    end of text                     end, or before a final ``\\n``
========================  ==============================  ==============================

So cl100k's ``\\p{N}{1,3}+`` must be written ``(?>\\p{N}{1,3})`` (an atomic group
means possessive in both engines) and ``$`` as ``\\Z`` for Hugging Face; reading
HF files applies the inverse table. The scanner knows escapes (``\\p{..}``),
character classes and groups, which is all tokenizer patterns use.

The two maps are exact inverses on patterns tokembed writes, so a stage
survives export and re-import character for character (same address hash).

Example::

    >>> to_onig(r"\\p{N}{1,3}+|\\s++$")
    '(?>\\\\p{N}{1,3})|\\\\s++\\\\Z'
"""

from __future__ import annotations

import regex

__all__ = ["from_onig", "to_onig"]

_BRACE_QUANT = regex.compile(r"\{\d+(?:,\d*)?\}")
_ESCAPE = regex.compile(r"\\(?:[pPx]\{[^}]*\}|[pP].|.)", regex.DOTALL)

# Anchors: (ours → Oniguruma) and (Oniguruma → ours), outside character classes.
_TO_ONIG = {"$": r"\Z", r"\Z": r"\z"}
_FROM_ONIG = {"$": r"(?m:$)", r"\Z": "$", r"\z": r"\Z"}
# `(?>ATOM{n,m})`, which to_onig writes for a possessive counted repeat; read back as `ATOM{n,m}+`
# so that a pattern survives the round trip unchanged (same address hash).
_ATOMIC_REPEAT = regex.compile(
    r"\(\?>(\\(?:[pPx]\{[^}]*\}|[pP].|.)|\[(?:\\.|[^\]\\])*\]|[^\\\[\]()|?*+{])"
    r"(\{\d+(?:,\d*)?\})\)"
)


def _class_end(pattern: str, start: int) -> int:
    """Index just past the character class that opens at ``start``."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":  # a leading ']' is literal
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def _translate(pattern: str, anchors: dict[str, str], *, possessive_to_onig: bool) -> str:
    out: list[str] = []
    group_opens: list[int] = []
    last_atom: int | None = None
    i = 0
    while i < len(pattern):
        c = pattern[i]
        brace = _BRACE_QUANT.match(pattern, i) if c == "{" else None
        if brace and last_atom is not None and pattern.startswith("+", brace.end()):
            atom = "".join(out[last_atom:]) + brace.group()
            del out[last_atom:]
            out.append(f"(?>{atom})" if possessive_to_onig else f"(?:{atom})+")
            i = brace.end() + 1
            continue
        if c == "\\":
            token = _ESCAPE.match(pattern, i)
            assert token is not None  # a trailing lone backslash never compiles
            text = token.group()
            last_atom = len(out)
            out.append(anchors.get(text, text))
            i = token.end()
        elif c == "[":
            end = _class_end(pattern, i)
            last_atom = len(out)
            out.append(pattern[i:end])
            i = end
        elif c == "(":
            group_opens.append(len(out))
            out.append(c)
            last_atom = None
            i += 1
        elif c == ")":
            out.append(c)
            last_atom = group_opens.pop() if group_opens else None
            if not possessive_to_onig and last_atom is not None:
                group = "".join(out[last_atom:])
                atomic = _ATOMIC_REPEAT.fullmatch(group)
                if atomic:
                    out[last_atom:] = [atomic.group(1) + atomic.group(2) + "+"]
            i += 1
        else:
            if c not in "?*+{|":
                last_atom = len(out)
            out.append(anchors.get(c, c))
            i += 1
    return "".join(out)


def to_onig(pattern: str) -> str:
    """The Oniguruma spelling of a ``regex`` pattern (same matches)."""
    return _translate(pattern, _TO_ONIG, possessive_to_onig=True)


def from_onig(pattern: str) -> str:
    """The ``regex`` spelling of an Oniguruma pattern (same matches)."""
    return _translate(pattern, _FROM_ONIG, possessive_to_onig=False)
