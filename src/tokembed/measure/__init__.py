"""Measuring tokenizers: corpora, partitions, metrics, curves, vocabulary sizes, table memory, reports.

Modules, by concept: ``corpus`` (named texts and their SHA-256 records, read through
:mod:`tokembed.text`), ``partition`` (document-level train/eval rules, the demo's file
holdout among them), ``metrics`` (bytes/token, fertility, retention, premiums: the one
measurement), ``curves`` (metrics at many merge counts), ``vocab_sizes`` / ``artifacts``
(|I|, R, V of files on disk), ``memory`` / ``payloads`` (parameters and bytes of the
embedding tables, payloads and MACs of lookups: the calculators behind
``tokembed memory``), ``tables`` and ``report`` (text and HTML output), ``session``
(what ``tokembed measure`` runs) and ``demo``.

Nothing here imports torch; matplotlib is imported only when a plot is drawn, NumPy
and the tokenizer only when something is measured.

Example::

    >>> from tokembed.measure import load_corpus, partition  # doctest: +SKIP
    >>> split = partition(load_corpus("ru_pud-ud-test.conllu"), rule="sha256-mod5")  # doctest: +SKIP
"""

from tokembed.measure import (
    artifacts,
    corpus,
    curves,
    demo,
    memory,
    metrics,
    payloads,
    report,
    session,
    tables,
)

# Two modules share their name with their main function; the functions take the package's
# names (`from tokembed.measure import partition` is the function), the modules are reached
# through private aliases here and as `from tokembed.measure.partition import ...` elsewhere.
from tokembed.measure import partition as _partition
from tokembed.measure import vocab_sizes as _vocab_sizes
from tokembed.measure.artifacts import *
from tokembed.measure.corpus import *
from tokembed.measure.curves import *
from tokembed.measure.demo import *
from tokembed.measure.memory import *
from tokembed.measure.metrics import *
from tokembed.measure.partition import *
from tokembed.measure.payloads import *
from tokembed.measure.report import *
from tokembed.measure.session import *
from tokembed.measure.tables import *
from tokembed.measure.vocab_sizes import *

__all__: list[str] = []
__all__ += artifacts.__all__
__all__ += corpus.__all__
__all__ += curves.__all__
__all__ += demo.__all__
__all__ += memory.__all__
__all__ += metrics.__all__
__all__ += _partition.__all__
__all__ += payloads.__all__
__all__ += report.__all__
__all__ += session.__all__
__all__ += tables.__all__
__all__ += _vocab_sizes.__all__
