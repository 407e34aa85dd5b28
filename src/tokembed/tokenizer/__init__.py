"""Byte-level BPE: patterns, pre-tokenization, tables, training, encoding, decoding, specials, files.

What users call first: :class:`Tokenizer`, :func:`train` with :class:`TrainConfig`,
:func:`load_tokenizer` / :func:`save_tokenizer` and the exporters (from
:mod:`tokembed.tokenizer.formats`, whose readers build a ``Tokenizer``). Every public
module's names are here too; each module's docstring says what it holds.

This package never imports torch, tiktoken or ``tokenizers`` on import.

Example::

    >>> from tokembed.tokenizer import TrainConfig, train
    >>> tok = train(["ababab"], config=TrainConfig(merges=1, progress=False))
    >>> tok.encode("ababab")
    [256, 256, 256]
"""

from tokembed.tokenizer import (
    bytes_unicode,
    chunks,
    compiled,
    dask_cluster,
    decode,
    dialect,
    encode,
    formats,
    learn,
    merges,
    model,
    oniguruma,
    patterns,
    pretokenize,
    shards,
    special,
    tokenizer,
)

# The modules; `train` and `train_reference` name their functions.
from tokembed.tokenizer import train as _train
from tokembed.tokenizer import train_reference as _train_reference
from tokembed.tokenizer.bytes_unicode import *
from tokembed.tokenizer.chunks import *
from tokembed.tokenizer.compiled import *
from tokembed.tokenizer.dask_cluster import *
from tokembed.tokenizer.decode import *
from tokembed.tokenizer.dialect import *
from tokembed.tokenizer.encode import *
from tokembed.tokenizer.formats import *
from tokembed.tokenizer.learn import *
from tokembed.tokenizer.merges import *
from tokembed.tokenizer.model import *
from tokembed.tokenizer.oniguruma import *
from tokembed.tokenizer.patterns import *
from tokembed.tokenizer.pretokenize import *
from tokembed.tokenizer.shards import *
from tokembed.tokenizer.special import *
from tokembed.tokenizer.tokenizer import *
from tokembed.tokenizer.train import *
from tokembed.tokenizer.train_reference import *

__all__: list[str] = []
__all__ += bytes_unicode.__all__
__all__ += chunks.__all__
__all__ += compiled.__all__
__all__ += dask_cluster.__all__
__all__ += decode.__all__
__all__ += dialect.__all__
__all__ += encode.__all__
__all__ += formats.__all__
__all__ += learn.__all__
__all__ += merges.__all__
__all__ += model.__all__
__all__ += oniguruma.__all__
__all__ += patterns.__all__
__all__ += pretokenize.__all__
__all__ += shards.__all__
__all__ += special.__all__
__all__ += tokenizer.__all__
__all__ += _train.__all__
__all__ += _train_reference.__all__
