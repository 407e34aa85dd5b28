"""Measuring tokenizers: corpora, partitions, metrics, curves, vocabulary sizes, reports.

Modules, by concept: ``corpus`` (named texts and their SHA-256 records, read through
:mod:`tokembed.text`), ``partition`` (document-level train/eval rules, the demo's file
holdout among them), ``metrics`` (bytes/token, fertility, retention, premiums: the one
measurement), ``curves`` (metrics at many merge counts), ``vocab_sizes`` / ``artifacts``
(|I|, R, V of files on disk), ``memory`` / ``payloads`` (parameters and bytes of the
embedding tables, payloads and MACs of lookups: the torch-free calculators behind
``tokembed memory``), ``tables`` and ``report`` (text and HTML output), ``session``
(what ``tokembed measure`` runs) and ``demo``.

Nothing here imports torch; matplotlib is imported only when a plot is drawn. The
names below are imported from their modules on first use.

Example::

    >>> from tokembed.measure import load_corpus, partition  # doctest: +SKIP
    >>> split = partition(load_corpus("ru_pud-ud-test.conllu"), rule="sha256-mod5")  # doctest: +SKIP
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
    from tokembed.measure.memory import (
        MemoryReport,
        TableConfig,
        load_table_config,
        memory_report,
        table_parameters,
        training_state_bytes,
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
    from tokembed.measure.payloads import (
        classifier_macs,
        gradient_payload,
        lookup_payload,
        projector_cost,
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
        load_tokenizers,
        run_measure,
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
    "MemoryReport": "memory",
    "TableConfig": "memory",
    "load_table_config": "memory",
    "memory_report": "memory",
    "table_parameters": "memory",
    "training_state_bytes": "memory",
    "classifier_macs": "payloads",
    "gradient_payload": "payloads",
    "lookup_payload": "payloads",
    "projector_cost": "payloads",
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
    "load_tokenizers": "session",
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
    "MeasureResult",
    "Measurement",
    "MemoryReport",
    "Partition",
    "PartitionRule",
    "ReportData",
    "TableConfig",
    "VocabSizes",
    "WordDefinition",
    "align",
    "build_report",
    "classifier_macs",
    "compare",
    "compression_curve",
    "curve_csv",
    "documents_corpus",
    "gradient_payload",
    "inspect_paths",
    "load_corpora",
    "load_corpus",
    "load_table_config",
    "load_tokenizers",
    "lookup_payload",
    "measure",
    "memory_report",
    "partition",
    "partition_parallel",
    "plot_curve",
    "projector_cost",
    "render_html",
    "run_demo",
    "run_measure",
    "table_parameters",
    "text_corpus",
    "token_premium",
    "training_state_bytes",
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
