"""The demo job: train a tokenizer on a corpus, hold whole files out, measure bytes per token.

This is the library side of ``tokembed demo`` (and ``make demo``): it takes
already-read :class:`~tokembed.measure.sources.SourceText` files, splits them
with :func:`~tokembed.measure.sources.holdout_split`, trains with
:func:`tokembed.tokenizer.train.train` and reports UTF-8 bytes per token on
the training files and on the held-out files. Printing and saving are the
CLI's job.

Example::

    >>> result = run_demo(default_corpus(max_bytes=200_000), config=DemoConfig(merges=64))  # doctest: +SKIP
    >>> round(result.train.bytes_per_token, 2)  # doctest: +SKIP
    1.9
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property

from tokembed.errors import UsageError
from tokembed.measure.sources import SourceText, holdout_split
from tokembed.tokenizer.tokenizer import Tokenizer
from tokembed.tokenizer.train import TrainConfig, train

__all__ = ["DemoConfig", "DemoResult", "SideStats", "measure_side", "run_demo"]


@dataclass(frozen=True, kw_only=True)
class DemoConfig:
    """Options of the demo run (defaults: the ~1–2 minute run of ``make demo``).

    Raises:
        UsageError(INVALID_ARGUMENT): holdout outside [0, 1); merges < 0 or workers < 1
            (checked by :class:`TrainConfig`).
        UsageError(INVALID_PATTERN): the pattern does not compile.
    """

    merges: int = 16384
    holdout: float = 0.1
    pattern: str = "teaching"
    workers: int = 1
    progress: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.holdout < 1.0:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"DemoConfig.holdout = {self.holdout!r} is invalid",
                value=self.holdout,
                fix="pass 0 <= holdout < 1",
            )
        self.train_config  # noqa: B018  (TrainConfig validates the rest: fail here, not later)

    @cached_property
    def train_config(self) -> TrainConfig:
        """The training half of these options."""
        return TrainConfig(
            merges=self.merges, pattern=self.pattern, workers=self.workers, progress=self.progress
        )


@dataclass(frozen=True, kw_only=True)
class SideStats:
    """Size of one side (train or held out) and its token count."""

    files: int
    n_bytes: int
    tokens: int

    @property
    def bytes_per_token(self) -> float:
        return self.n_bytes / self.tokens if self.tokens else 0.0


@dataclass(frozen=True, kw_only=True)
class DemoResult:
    tokenizer: Tokenizer
    train: SideStats
    held_out: SideStats
    train_seconds: float


def measure_side(tok: Tokenizer, sources: list[SourceText]) -> SideStats:
    """UTF-8 bytes and ordinary-encoding tokens of ``sources`` (special spellings are text)."""
    return SideStats(
        files=len(sources),
        n_bytes=sum(s.n_bytes for s in sources),
        tokens=sum(len(tok.encode_ordinary(s.text)) for s in sources),
    )


def run_demo(sources: list[SourceText], *, config: DemoConfig) -> DemoResult:
    """Hold out files, train on the rest, measure both sides.

    Raises:
        TokenizerError(EMPTY_CORPUS): the training side has no text.
    """
    train_side, held_side = holdout_split(sources, fraction=config.holdout)
    start = time.perf_counter()
    tok = train((s.text for s in train_side), config=config.train_config)
    seconds = time.perf_counter() - start
    return DemoResult(
        tokenizer=tok,
        train=measure_side(tok, train_side),
        held_out=measure_side(tok, held_side),
        train_seconds=seconds,
    )
