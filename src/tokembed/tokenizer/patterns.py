"""The pre-tokenization patterns tokembed knows by name, and the ones its compiled scanner runs.

:data:`PATTERNS` are the presets a :class:`~tokembed.tokenizer.pretokenize.Pretokenizer`
accepts by name: ``teaching`` (cl100k's pattern without possessive digit runs, the
training default), ``r50k`` (alias ``gpt2``), ``cl100k`` and ``o200k`` (copied from the
tiktoken package's ``tiktoken_ext/openai_public.py``, tiktoken 0.14, so that chunks are
bit-identical to tiktoken's) and ``gpt2-hf`` (GPT-2's pattern as Hugging Face's ByteLevel
pre-tokenizer writes it). :data:`QWEN` is the pattern of Qwen's rank file (its published
``tokenization_qwen.py``); it is an encoding's pattern, not a preset name.

:data:`SCANNED` is the one table of the patterns the compiled scanner (``_native/scan.c``)
matches by hand: a pattern's position in it is its scanner id, and
``_native/scan_presets.h`` is generated from it (``_gen_tables.py``).

Example::

    >>> scanner_id(PATTERNS["o200k"]), scanner_id(QWEN), scanner_id(r"\\w+")
    (3, 5, None)
"""

from __future__ import annotations

__all__ = ["PATTERNS", "QWEN", "SCANNED", "scanner_id"]

_O200K_PARTS = [
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
]

PATTERNS: dict[str, str] = {
    "teaching": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""",
    "r50k": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""",
    "cl100k": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    "o200k": "|".join(_O200K_PARTS),
    "gpt2-hf": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
}
PATTERNS["gpt2"] = PATTERNS["r50k"]

QWEN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

# Name and pattern of each pattern the compiled scanner matches, in scanner-id order (the
# generated scan_presets.h numbers TK_PRESET_<NAME> by position here).
SCANNED: tuple[tuple[str, str], ...] = (
    ("teaching", PATTERNS["teaching"]),
    ("r50k", PATTERNS["r50k"]),
    ("cl100k", PATTERNS["cl100k"]),
    ("o200k", PATTERNS["o200k"]),
    ("gpt2-hf", PATTERNS["gpt2-hf"]),
    ("qwen", QWEN),
)
_IDS = {pattern: i for i, (_, pattern) in enumerate(SCANNED)}


def scanner_id(pattern: str) -> int | None:
    """The compiled scanner's id for ``pattern``, or None when it does not scan that pattern."""
    return _IDS.get(pattern)
