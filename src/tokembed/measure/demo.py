"""The demo job: train a tokenizer on a corpus, hold whole files out, measure bytes per token.

This is the library side of ``tokembed demo`` (and ``make demo``): it takes
already-read :class:`~tokembed.text.sources.SourceText` files, makes them one
corpus with a document per file, splits it with the ``holdout<F>`` partition rule
(:mod:`.partition`), trains with :func:`tokembed.tokenizer.train.train` on the
training side, and measures both sides with :func:`~tokembed.measure.metrics.compare`,
the measurement ``tokembed measure`` and the report use. The demo's report is built
from these same measurements. Printing and saving are the CLI's job.

Example::

    >>> result = run_demo(default_corpus(max_bytes=200_000), config=DemoConfig(merges=64))  # doctest: +SKIP
    >>> round(result.train.bytes_per_token, 2)  # doctest: +SKIP
    1.9
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from tokembed.errors import UsageError
from tokembed.measure.corpus import Corpus, documents_corpus
from tokembed.measure.metrics import Measurement, compare
from tokembed.measure.partition import Partition, PartitionRule, partition
from tokembed.text.sources import SourceText

if TYPE_CHECKING:
    from tokembed.tokenizer.tokenizer import Tokenizer
    from tokembed.tokenizer.train import TrainConfig

__all__ = ["DemoConfig", "DemoResult", "demo_corpus", "run_demo"]

TRAIN, HELD_OUT = "train", "held-out"


@dataclass(frozen=True, kw_only=True)
class DemoConfig:
    """Options of the demo run (defaults: the ~1–2 minute run of ``make demo``).

    ``name`` is given to the trained tokenizer; every table and plot shows it.

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
    name: str = "demo"

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
        # The tokenizer is imported when a demo is configured, not with tokembed.measure.
        from tokembed.tokenizer.train import TrainConfig

        return TrainConfig(
            merges=self.merges, pattern=self.pattern, workers=self.workers, progress=self.progress
        )

    @property
    def rule(self) -> PartitionRule:
        """The partition rule that holds out whole files."""
        return PartitionRule.holdout(self.holdout)


@dataclass(frozen=True, kw_only=True)
class DemoResult:
    """The trained tokenizer, the two sides and their measurements (labels ``train``, ``held-out``)."""

    tokenizer: Tokenizer
    partition: Partition
    measurements: tuple[Measurement, ...]
    train_seconds: float

    @property
    def corpora(self) -> dict[str, Corpus]:
        """The measured sides by label; ``held-out`` is absent when nothing was held out."""
        sides = {TRAIN: self.partition.train, HELD_OUT: self.partition.eval}
        return {label: c for label, c in sides.items() if c.text}

    def _side(self, label: str) -> Measurement | None:
        return next((m for m in self.measurements if m.corpus == label), None)

    @property
    def train(self) -> Measurement:
        side = self._side(TRAIN)
        assert side is not None  # the training side has text, or training failed
        return side

    @property
    def held_out(self) -> Measurement | None:
        return self._side(HELD_OUT)


def demo_corpus(sources: Sequence[SourceText], *, name: str = "corpus") -> Corpus:
    """The sources as one plain-text corpus, a document per file (id: the file's name)."""
    files = tuple(s.record for s in sources if s.record is not None)
    return documents_corpus(name, [(s.name, s.text) for s in sources], files=files)


def run_demo(sources: Sequence[SourceText], *, config: DemoConfig) -> DemoResult:
    """Hold out files, train on the rest, measure both sides.

    Raises:
        TokenizerError(EMPTY_CORPUS): the training side has no text.
        MeasureError(INVALID_PARTITION): there are no files.
        MeasureError(EMPTY_WORD_DEFINITION): a side has no letter or digit.
    """
    from tokembed.tokenizer.train import train

    parts = partition(demo_corpus(sources), rule=config.rule)
    start = time.perf_counter()
    tok = train((text for _, text in parts.train.raw), config=config.train_config)
    seconds = time.perf_counter() - start
    tok.name = config.name
    sides = {TRAIN: parts.train, HELD_OUT: parts.eval}
    measured = compare({config.name: tok}, {k: c for k, c in sides.items() if c.text})
    return DemoResult(
        tokenizer=tok, partition=parts, measurements=tuple(measured), train_seconds=seconds
    )
