"""Tokenizer files: tokembed's JSON, tiktoken rank files, Hugging Face and GPT-2 files, and specs.

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

from tokembed.tokenizer.formats import (
    encodings,
    gpt2_files,
    hf,
    load,
    named,
    native,
    ranks,
    specs,
    tiktoken_files,
)
from tokembed.tokenizer.formats.encodings import *
from tokembed.tokenizer.formats.gpt2_files import *
from tokembed.tokenizer.formats.hf import *
from tokembed.tokenizer.formats.load import *
from tokembed.tokenizer.formats.named import *
from tokembed.tokenizer.formats.native import *
from tokembed.tokenizer.formats.ranks import *
from tokembed.tokenizer.formats.specs import *
from tokembed.tokenizer.formats.tiktoken_files import *

__all__: list[str] = []
__all__ += encodings.__all__
__all__ += gpt2_files.__all__
__all__ += hf.__all__
__all__ += load.__all__
__all__ += named.__all__
__all__ += native.__all__
__all__ += ranks.__all__
__all__ += specs.__all__
__all__ += tiktoken_files.__all__
