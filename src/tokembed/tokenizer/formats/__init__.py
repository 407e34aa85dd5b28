"""Tokenizer files: tokembed's JSON, tiktoken rank files, Hugging Face and GPT-2 files.

Every reader produces a :class:`~tokembed.tokenizer.tokenizer.Tokenizer` whose
encoding equals the original library's on the same text (tested against
tiktoken and ``tokenizers`` on 13 languages), or refuses the file whole with
a :class:`~tokembed.errors.FormatError` code. Every writer is atomic and never
overwrites an input.

Example::

    >>> tok = load_tokenizer("cl100k_base.tiktoken")  # doctest: +SKIP
    >>> tok = get_encoding("cl100k_base")  # by name, via tiktoken's cache  # doctest: +SKIP
    >>> export_hf(tok, "out/cl100k")  # doctest: +SKIP
"""

from tokembed.tokenizer.formats.encodings import EncodingSpec, encoding_spec, known_encodings
from tokembed.tokenizer.formats.gpt2_files import load_vocab_merges
from tokembed.tokenizer.formats.hf import export_hf, load_hf
from tokembed.tokenizer.formats.load import load_tokenizer
from tokembed.tokenizer.formats.named import (
    encoding_for_model,
    encoding_name_for_model,
    get_encoding,
    list_encoding_names,
    tiktoken_cache_dir,
)
from tokembed.tokenizer.formats.native import load_native, save_tokenizer
from tokembed.tokenizer.formats.ranks import parse_ranks, ranks_to_tables, tables_to_ranks
from tokembed.tokenizer.formats.tiktoken_files import export_tiktoken, load_tiktoken

__all__ = [
    "EncodingSpec",
    "encoding_for_model",
    "encoding_name_for_model",
    "encoding_spec",
    "export_hf",
    "export_tiktoken",
    "get_encoding",
    "known_encodings",
    "list_encoding_names",
    "load_hf",
    "load_native",
    "load_tiktoken",
    "load_tokenizer",
    "load_vocab_merges",
    "parse_ranks",
    "ranks_to_tables",
    "save_tokenizer",
    "tables_to_ranks",
    "tiktoken_cache_dir",
]
