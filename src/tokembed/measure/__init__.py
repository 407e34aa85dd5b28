"""Measuring tokenizers: text input, corpora, partitions, metrics, curves, vocabulary sizes, reports.

Modules, by concept: ``sources`` (the one reader of text files, folders, globs, gzip
and stdin), ``corpus`` / ``conllu`` (named texts and their SHA-256 records),
``partition`` (document-level train/eval rules, the demo's file holdout among them),
``metrics`` (bytes/token, fertility, retention, premiums: the one measurement),
``curves`` (metrics at many merge counts), ``vocab_sizes`` / ``artifacts`` (|I|, R, V
of files on disk), ``tables`` and ``report`` (text and HTML output), ``session``
(what ``tokembed measure`` runs) and ``demo``.

Nothing here imports torch; matplotlib is imported only when a plot is drawn. The
names below are imported from their modules on first use, so reading text through
:mod:`tokembed.measure.sources` does not load numpy or the report.

Example::

    >>> from tokembed.measure import load_corpus, partition  # doctest: +SKIP
    >>> split = partition(load_corpus("ru_pud-ud-test.conllu"), rule="lecture")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokembed._lazy import attach

if TYPE_CHECKING:
    from tokembed.measure.artifacts import (
        inspect_paths,
    )
    from tokembed.measure.corpus import (
        Corpus,
        CorpusRecord,
        align,
        documents_corpus,
        load_corpus,
        text_corpus,
    )
    from tokembed.measure.curves import (
        CurvePoint,
        compression_curve,
        curve_csv,
        plot_curve,
    )
    from tokembed.measure.demo import (
        DemoConfig,
        DemoResult,
        run_demo,
    )
    from tokembed.measure.metrics import (
        Measurement,
        WordDefinition,
        compare,
        measure,
        token_premium,
    )
    from tokembed.measure.partition import (
        Partition,
        PartitionRule,
        partition,
        partition_parallel,
    )
    from tokembed.measure.report import (
        ReportData,
        build_report,
        render_html,
        write_report,
    )
    from tokembed.measure.session import (
        MeasureResult,
        load_corpora,
        run_measure,
    )
    from tokembed.measure.sources import (
        FileRecord,
        SourceText,
        default_corpus,
        expand_paths,
        read_source,
        read_texts,
    )
    from tokembed.measure.vocab_sizes import (
        VocabSizes,
        vocab_sizes,
        vocab_sizes_of,
    )

# Public name -> the module that defines it.
_SOURCES: dict[str, str] = {
    "Corpus": "corpus",
    "CorpusRecord": "corpus",
    "align": "corpus",
    "load_corpus": "corpus",
    "documents_corpus": "corpus",
    "text_corpus": "corpus",
    "SourceText": "sources",
    "FileRecord": "sources",
    "read_texts": "sources",
    "read_source": "sources",
    "expand_paths": "sources",
    "default_corpus": "sources",
    "Measurement": "metrics",
    "WordDefinition": "metrics",
    "compare": "metrics",
    "measure": "metrics",
    "token_premium": "metrics",
    "Partition": "partition",
    "PartitionRule": "partition",
    "partition": "partition",
    "partition_parallel": "partition",
    "CurvePoint": "curves",
    "compression_curve": "curves",
    "curve_csv": "curves",
    "plot_curve": "curves",
    "VocabSizes": "vocab_sizes",
    "vocab_sizes": "vocab_sizes",
    "vocab_sizes_of": "vocab_sizes",
    "inspect_paths": "artifacts",
    "MeasureResult": "session",
    "load_corpora": "session",
    "run_measure": "session",
    "ReportData": "report",
    "build_report": "report",
    "render_html": "report",
    "write_report": "report",
    "DemoConfig": "demo",
    "DemoResult": "demo",
    "run_demo": "demo",
}

__all__ = [
    "Corpus",
    "CorpusRecord",
    "CurvePoint",
    "DemoConfig",
    "DemoResult",
    "FileRecord",
    "MeasureResult",
    "Measurement",
    "Partition",
    "PartitionRule",
    "ReportData",
    "SourceText",
    "VocabSizes",
    "WordDefinition",
    "align",
    "build_report",
    "compare",
    "compression_curve",
    "curve_csv",
    "default_corpus",
    "documents_corpus",
    "expand_paths",
    "inspect_paths",
    "load_corpora",
    "load_corpus",
    "measure",
    "partition",
    "partition_parallel",
    "plot_curve",
    "read_source",
    "read_texts",
    "render_html",
    "run_demo",
    "run_measure",
    "text_corpus",
    "token_premium",
    "vocab_sizes",
    "vocab_sizes_of",
    "write_report",
]


__getattr__, __dir__ = attach(__name__, _SOURCES)

# Two functions share their module's name. Importing a submodule binds the package
# attribute of that name to the module, so these two are bound eagerly, after their
# modules, to keep `from tokembed.measure import partition` the function.
from tokembed.measure.partition import partition  # noqa: E402
from tokembed.measure.vocab_sizes import vocab_sizes  # noqa: E402
