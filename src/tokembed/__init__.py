"""tokembed: from text to a language model's initial state and back.

Packages, by concept:

* ``tokembed.tokenizer`` — exact byte-level BPE (no torch).
* ``tokembed.measure`` — corpora, metrics, compression curves, vocabulary sizes, reports.
* ``tokembed.embedding`` — embedding tables with checked contracts, NumPy oracles, ledgers.
* ``tokembed.parallel`` — vocabulary-parallel tables on torch.distributed.

Heavy dependencies (torch, matplotlib, transformers) are imported by the
subpackages that need them, never here.
"""

from tokembed.errors import TokembedError

__all__ = ["TokembedError", "__version__"]

__version__ = "0.1.0"
