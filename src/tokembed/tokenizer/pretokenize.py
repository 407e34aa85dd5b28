"""Pre-tokenization: split text into the chunks inside which merges may happen.

A :class:`Pretokenizer` is an ordered tuple of regex stages. Each stage splits
every chunk produced by the previous stage. A stage keeps its matches *and* the
gaps between them as chunks ("isolated" splitting, as Hugging Face's ``Split``),
so pre-tokenization never drops text even for a user regex that does not cover
every character; for patterns that do cover every character (all presets) this
equals ``regex.findall``.

Presets (:data:`~tokembed.tokenizer.patterns.PATTERNS`): ``teaching`` (the default),
``r50k``/``gpt2``, ``cl100k``, ``o200k`` and ``gpt2-hf``.

A user regex can backtrack exponentially (``(a+)+$`` on a long run of ``a``).
Stages that are not presets therefore run with a time limit that grows with the
text (2 s plus 1 s per 50,000 characters, far above what a linear pattern
needs); past it, splitting raises INVALID_PATTERN instead of hanging.

Whose regex reading defines the chunks is part of a pre-tokenizer: its ``dialect``
is ``"tiktoken"`` (rank files, and the default for training) or
``"huggingface"`` (``tokenizer.json``). Splitting here runs the ``regex`` module
on patterns rewritten by :mod:`~tokembed.tokenizer.dialect` so that its Unicode
tables agree with that engine's on every code point.

This module does not normalize text and does not know about special tokens.

Example::

    >>> Pretokenizer.preset("teaching").split("Hello world 12345")
    ['Hello', ' world', ' ', '123', '45']
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import regex

from tokembed.errors import UsageError, require_choice
from tokembed.tokenizer.dialect import (
    DIALECTS,
    Dialect,
    contains_any,
    dialect_pattern,
    dialect_trigger,
)
from tokembed.tokenizer.patterns import PATTERNS, QWEN

__all__ = ["Piece", "Pretokenizer", "iter_pieces", "time_limit"]

# Presets and Qwen's pattern (and their dialect forms) are linear: no limit needed.
_LINEAR = {*PATTERNS.values(), QWEN}
_BASE_SECONDS = 2.0
_CHARS_PER_SECOND = 50_000


def _compile(pattern: str) -> regex.Pattern[str]:
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise UsageError(
            "INVALID_PATTERN",
            f"pre-tokenization regex does not compile: {exc}",
            value=pattern,
            fix=f"pass a valid `regex` pattern or a preset name ({', '.join(sorted(PATTERNS))})",
        ) from exc


def _check_rewrite(stage: str, dialect: Dialect) -> None:
    """Refuse a stage whose rewrite for ``dialect`` does not compile: one whose classes the
    rewriter reads apart differently from ``regex`` (a fuzzed sidecar's ``\\p[L...\\p{N}]``
    compiled as written, then failed on the first text that needed the rewrite)."""
    pattern = dialect_pattern(stage, dialect)
    if pattern == stage:
        return
    try:
        regex.compile(pattern)
    except regex.error as exc:
        raise UsageError(
            "INVALID_PATTERN",
            f"pre-tokenization regex cannot be read exactly as {dialect} reads it: {exc}",
            value=stage,
            fix="write each class and property escape in full (\\p{...}, [...]) or pass a "
            f"preset name ({', '.join(sorted(PATTERNS))})",
        ) from exc


# (absolute start, absolute end, is a regex match, text)
Piece = tuple[int, int, bool, str]


def time_limit(pattern: str, n_chars: int) -> float | None:
    """Seconds a stage may spend on ``n_chars`` characters (None: presets are not limited)."""
    return None if pattern in _LINEAR else _BASE_SECONDS + n_chars / _CHARS_PER_SECOND


def _too_slow(compiled: regex.Pattern[str], n_chars: int) -> UsageError:
    return UsageError(
        "INVALID_PATTERN",
        f"pre-tokenization regex ran past its limit of {time_limit(compiled.pattern, n_chars):.0f} s "
        f"on {n_chars:,} characters; it backtracks catastrophically on this text",
        value=compiled.pattern,
        fix="remove nested quantifiers such as (a+)+ or use possessive/atomic forms (a++)",
    )


def iter_pieces(compiled: regex.Pattern[str], text: str, base: int = 0) -> Iterator[Piece]:
    """Matches and the non-empty gaps between them, in order, with offsets from ``base``.

    This is the one definition of isolated splitting; empty matches carry no
    text and are skipped (they would otherwise loop forever).

    Raises:
        UsageError(INVALID_PATTERN): a non-preset pattern exceeded :func:`time_limit`.
    """
    pos = 0
    try:
        for m in compiled.finditer(text, timeout=time_limit(compiled.pattern, len(text))):
            start, end = m.span()
            if start == end:
                continue
            if start > pos:
                yield base + pos, base + start, False, text[pos:start]
            yield base + start, base + end, True, m.group()
            pos = end
    except TimeoutError:
        raise _too_slow(compiled, len(text)) from None
    if pos < len(text):
        yield base + pos, base + len(text), False, text[pos:]


def _split_isolated(compiled: regex.Pattern[str], text: str) -> list[str]:
    """The texts of :func:`iter_pieces`; never loses a character."""
    if compiled.groups == 0:
        # Fast path (~1.6x on RusLit40): when the matches alone tile the text there
        # are no gaps, and C-level findall gives the same chunks (minus empty ones).
        try:
            found: list[str] = compiled.findall(
                text, timeout=time_limit(compiled.pattern, len(text))
            )
        except TimeoutError:
            raise _too_slow(compiled, len(text)) from None
        if sum(map(len, found)) == len(text):
            return [c for c in found if c] if "" in found else found
    return [piece[3] for piece in iter_pieces(compiled, text)]


@dataclass(frozen=True, kw_only=True)
class Pretokenizer:
    """Ordered regex stages; ``name`` records a preset name when one was used; ``dialect``
    names the regex engine whose reading of the stages is the truth.

    Raises:
        UsageError(INVALID_PATTERN): a stage does not compile, or its rewrite for the
            dialect does not (see ``patterns``), or no stage is given;
            from :meth:`split`, a stage that is not a preset ran past its time limit.
    """

    stages: tuple[str, ...]
    name: str | None = None
    dialect: Dialect = "tiktoken"
    _compiled: tuple[regex.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.stages:
            raise UsageError(
                "INVALID_PATTERN",
                "a pre-tokenizer needs at least one regex stage",
                value=self.stages,
                fix="pass a preset name such as 'teaching' or one regex",
            )
        require_choice(
            self.dialect,
            DIALECTS,
            "regex dialect",
            fix=f"pass dialect= one of {', '.join(DIALECTS)}",
        )
        object.__setattr__(self, "_compiled", tuple(_compile(s) for s in self.stages))
        for stage in self.stages:
            if stage not in _LINEAR:  # the presets' rewrites are known to compile
                _check_rewrite(stage, self.dialect)

    @classmethod
    def preset(cls, name_or_regex: str, *, dialect: Dialect = "tiktoken") -> Pretokenizer:
        """A preset by name, or a single-stage pre-tokenizer for any other string (a regex)."""
        if name_or_regex in PATTERNS:
            return cls(stages=(PATTERNS[name_or_regex],), name=name_or_regex, dialect=dialect)
        return cls(stages=(name_or_regex,), dialect=dialect)

    @cached_property
    def patterns(self) -> tuple[str, ...]:
        """The stages as the ``regex`` module must read them to split like ``dialect``."""
        out = []
        for stage in self.stages:
            pattern = dialect_pattern(stage, self.dialect)
            if stage in _LINEAR:
                _LINEAR.add(pattern)
            out.append(pattern)
        return tuple(out)

    @cached_property
    def _splitters(self) -> tuple[regex.Pattern[str], ...]:
        return tuple(
            c if p == c.pattern else regex.compile(p)
            for p, c in zip(self.patterns, self._compiled, strict=True)
        )

    @cached_property
    def _triggers(self) -> tuple[np.ndarray, ...]:
        # Code points on which a stage and its dialect rewrite differ (recent Unicode
        # additions); the rewrite is about 3x slower in `regex`, so text without any of
        # them is split with the stage as written, which then matches identically.
        return tuple(
            dialect_trigger(stage, self.dialect) if pattern != stage else np.empty(0, np.uint32)
            for stage, pattern in zip(self.stages, self.patterns, strict=True)
        )

    def split(self, text: str) -> list[str]:
        """Chunks of ``text``; ``"".join(self.split(t)) == t`` always holds."""
        stages = [
            rewritten if contains_any(text, trigger) else plain
            for plain, rewritten, trigger in zip(
                self._compiled, self._splitters, self._triggers, strict=True
            )
        ]
        chunks = _split_isolated(stages[0], text)
        for compiled in stages[1:]:
            chunks = [piece for chunk in chunks for piece in _split_isolated(compiled, chunk)]
        return chunks

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (used by file formats)."""
        return {"name": self.name, "stages": list(self.stages), "dialect": self.dialect}
