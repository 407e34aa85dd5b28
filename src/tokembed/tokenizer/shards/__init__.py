"""Corpora tokenized into training shards that name the tokenizer that made them.

:func:`tokenize_corpus` (``tokembed tokenize``) reads files, folders, globs, gzip, standard
input, CoNLL-U and JSON Lines, cuts them into documents, and writes Megatron-Core's indexed
dataset (``.bin`` + ``.idx``) or nanoGPT's flat ``.bin`` of ids, with a manifest that
records the tokenizer's address hash, every input's SHA-256, the counts and the options.
The output is byte-identical for every worker count and engine, and an interrupted run
resumes from its manifest. ``tokembed.embedding.open_shards`` reads the shards back as
batches stamped with the tokenizer's address hash.

Example::

    >>> m = tokenize_corpus(["corpus.jsonl"], tokenizer=tok, output="shards")  # doctest: +SKIP
    >>> m.complete, m.dtype  # doctest: +SKIP
    (True, 'uint16')
"""

from tokembed.tokenizer.shards import (
    cluster,
    manifest,
    options,
    plan,
    shard_formats,
    shard_writer,
    tokenize,
)
from tokembed.tokenizer.shards.cluster import *
from tokembed.tokenizer.shards.manifest import *
from tokembed.tokenizer.shards.options import *
from tokembed.tokenizer.shards.plan import *
from tokembed.tokenizer.shards.shard_formats import *
from tokembed.tokenizer.shards.shard_writer import *
from tokembed.tokenizer.shards.tokenize import *

__all__: list[str] = []
__all__ += cluster.__all__
__all__ += manifest.__all__
__all__ += options.__all__
__all__ += plan.__all__
__all__ += shard_formats.__all__
__all__ += shard_writer.__all__
__all__ += tokenize.__all__
