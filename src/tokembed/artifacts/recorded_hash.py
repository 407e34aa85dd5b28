"""The tokenizer address hash a model's files record: what is written, and reading it back.

Rows of an embedding table answer to one tokenizer's ids; the tokenizer's
``address_hash`` (``"sha256:<64 hex>"``) names that address space. A tokembed
checkpoint records it in the ``address_hash`` field of its metadata record
(:data:`~tokembed.artifacts.safetensors_header.CHECKPOINT_META_KEY`), so that
loading with another tokenizer, admitting a tokenizer/model pair, or migrating a
vocabulary can compare the tokenizer in hand with the one the rows were trained
with. This module is the one place that turns "a tokenizer, or its hash" into
the recorded string (:func:`address_hash_of`) and that finds the recorded hash
in a folder (:func:`folder_address_hash`) or in headers already read
(:func:`recorded_address_hash`). torch-free: only headers are read.

Example::

    >>> address_hash_of("sha256:" + "ab" * 32)[:9]
    'sha256:ab'
    >>> folder_address_hash("migrated/")  # doctest: +SKIP
    'sha256:6229d1c9592c...'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokembed.artifacts.safetensors_header import checkpoint_metadata, read_safetensors_header

__all__ = ["ADDRESS_HASH_FIELD", "address_hash_of", "folder_address_hash", "recorded_address_hash"]

ADDRESS_HASH_FIELD = "address_hash"


def address_hash_of(tokenizer: Any) -> str | None:
    """The hash to record for ``tokenizer``: its ``address_hash``, the string itself, or None.

    Example::

        >>> address_hash_of(None) is None
        True

    Raises:
        AttributeError: ``tokenizer`` is neither None, a string, nor has ``address_hash``.
    """
    if tokenizer is None:
        return None
    return tokenizer if isinstance(tokenizer, str) else str(tokenizer.address_hash)


def recorded_address_hash(
    headers: Mapping[Path, Mapping[str, Any]],
) -> tuple[str, Path] | None:
    """The first recorded hash among safetensors ``headers`` (in their order), and its file.

    ``headers`` maps each file to its header as
    :func:`~tokembed.artifacts.safetensors_header.read_safetensors_header` read it.
    None when no file records one (a model not written by tokembed).

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: a tokembed record that is not JSON of version 1.
    """
    for file, header in headers.items():
        meta = checkpoint_metadata(header, file)
        found = meta.get(ADDRESS_HASH_FIELD) if meta else None
        if found:
            return str(found), file
    return None


def folder_address_hash(folder: str | os.PathLike[str]) -> str | None:
    """The address hash recorded in a model folder's ``*.safetensors`` files (name order).

    None for a folder whose files record none, and for a path that is not a folder
    (a ``.gguf`` file records no hash).

    Example::

        >>> folder_address_hash("models/smollm2") is None  # from the Hub: no record  # doctest: +SKIP
        True

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: a safetensors file that is truncated or
            not safetensors, or a tokembed record that is not JSON of version 1.
    """
    path = Path(folder)
    for file in sorted(path.glob("*.safetensors")) if path.is_dir() else ():
        # One header at a time: the first file that records a hash answers.
        found = recorded_address_hash({file: read_safetensors_header(file)})
        if found is not None:
            return found[0]
    return None
