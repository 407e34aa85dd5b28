"""Measuring tokenizers: corpora with records, partitions, metrics, curves, vocabulary sizes, reports.

Modules, by concept: ``corpus`` / ``conllu`` (named texts and their SHA-256 records),
``partition`` (document-level train/eval rules), ``metrics`` (bytes/token,
fertility, retention, premiums), ``curves`` (metrics at many merge counts),
``vocab_sizes`` / ``artifacts`` (|I|, R, V of files on disk), ``tables`` and
``report`` (text and HTML output), ``sources`` / ``demo`` (training input, the demo).

Nothing here imports torch; matplotlib is imported only when a plot is drawn.
"""

from tokembed.measure.corpus import Corpus, CorpusRecord, align, load_corpus
from tokembed.measure.metrics import Measurement, WordDefinition, compare, measure, token_premium
from tokembed.measure.partition import PartitionRule, partition, partition_parallel
from tokembed.measure.vocab_sizes import VocabSizes, vocab_sizes

__all__ = [
    "Corpus",
    "CorpusRecord",
    "Measurement",
    "PartitionRule",
    "VocabSizes",
    "WordDefinition",
    "align",
    "compare",
    "load_corpus",
    "measure",
    "partition",
    "partition_parallel",
    "token_premium",
    "vocab_sizes",
]
