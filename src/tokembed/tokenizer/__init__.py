"""Byte-level BPE: pre-tokenization, training, encoding, decoding, special tokens, file formats.

What users call is exported here: :class:`Tokenizer`, :func:`train` with
:class:`TrainConfig`, :func:`load_tokenizer` / :func:`save_tokenizer` and the
exporters. The file functions live in :mod:`tokembed.tokenizer.formats`, whose
readers build a ``Tokenizer``; they are imported on first use so that importing
this package does not import every reader.

This package never imports torch.

Example::

    >>> from tokembed.tokenizer import TrainConfig, train
    >>> tok = train(["ababab"], config=TrainConfig(merges=1, progress=False))
    >>> tok.encode("ababab")
    [256, 256, 256]
"""

from typing import TYPE_CHECKING, Any

from tokembed.tokenizer.decode import StreamDecoder
from tokembed.tokenizer.model import BPETables, address_hash
from tokembed.tokenizer.pretokenize import PATTERNS, Pretokenizer
from tokembed.tokenizer.tokenizer import Tokenizer
from tokembed.tokenizer.train import TrainConfig, train
from tokembed.tokenizer.train_reference import train_reference

if TYPE_CHECKING:
    from tokembed.tokenizer.formats import (
        export_hf,
        export_tiktoken,
        load_tokenizer,
        save_tokenizer,
    )

__all__ = [
    "PATTERNS",
    "BPETables",
    "Pretokenizer",
    "StreamDecoder",
    "Tokenizer",
    "TrainConfig",
    "address_hash",
    "export_hf",
    "export_tiktoken",
    "load_tokenizer",
    "save_tokenizer",
    "train",
    "train_reference",
]

_FROM_FORMATS = frozenset({"export_hf", "export_tiktoken", "load_tokenizer", "save_tokenizer"})


def __getattr__(name: str) -> Any:
    # formats/ imports tokenizer.py, so importing it from here at start-up would
    # run it while this package is half-initialized; on first use it is complete.
    if name in _FROM_FORMATS:
        from tokembed.tokenizer import formats

        return getattr(formats, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
