"""Text input, one reader for every package: files, folders, globs, gzip, stdin, ranges, CoNLL-U.

* :mod:`~tokembed.text.sources` reads whole files (:func:`read_source`, :func:`read_texts`)
  or streams them in blocks (:func:`iter_text_blocks`), after :func:`expand_paths` has named
  the files of folders and globs; gzip is recognised by content, ``"-"`` is standard input,
  a byte that is not UTF-8 is refused with its file and offset;
* :mod:`~tokembed.text.ranges` cuts files into byte ranges at line feeds
  (:func:`split_ranges`, :func:`read_range`) so that several workers read one corpus;
* :mod:`~tokembed.text.conllu` gives the sentences of CoNLL-U files with their document
  and sentence ids;
* :mod:`~tokembed.text.jsonl` reads JSON Lines records' text fields;
* :mod:`~tokembed.text.documents` cuts any of these into documents (a line, a blank-line
  paragraph, a file, the pieces between separators, a record) as a stream.

Only the standard library and ``regex`` are imported: reading text loads neither NumPy nor
torch. The tokenizer and the measurements read their input here.

Example::

    >>> from tokembed.text import read_texts
    >>> texts = read_texts(["docs/", "notes/*.txt.gz"], max_bytes=8_000_000)  # doctest: +SKIP
    >>> texts[0].record.sha256  # doctest: +SKIP
"""

from tokembed.text import conllu, documents, jsonl, ranges, sources
from tokembed.text.conllu import *
from tokembed.text.documents import *
from tokembed.text.jsonl import *
from tokembed.text.ranges import *
from tokembed.text.sources import *

__all__: list[str] = []
__all__ += conllu.__all__
__all__ += documents.__all__
__all__ += jsonl.__all__
__all__ += ranges.__all__
__all__ += sources.__all__
