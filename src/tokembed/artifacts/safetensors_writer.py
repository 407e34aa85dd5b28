"""A streaming safetensors writer: tensor bytes go from tensor memory to the file, uncopied.

``safetensors.torch.save_file`` first converts every tensor to a Python
``bytes`` object, so saving a model plus Adam state briefly holds a second copy
of all of it (6 GiB for a 128,000 x 4,096 fp32 table with two moments). The
file format is simple enough to write directly: an 8-byte little-endian header
length, the JSON header (dtype, shape, byte offsets per tensor, and the string
``__metadata__``) padded with spaces to a multiple of 8, then the raw
row-major bytes back to back. Files written here are read by ``safe_open``,
``load_file`` and transformers like any other, and by
:func:`~tokembed.artifacts.safetensors_header.read_safetensors_header`.

This is the project's one safetensors writer: checkpoints, migrated model
folders and vocabulary shards are all written by :func:`write_safetensors`.
torch is imported when it is called, not when this module is imported.

Example::

    >>> write_safetensors(Path("x.safetensors"), {"w": torch.zeros(2, 3)},
    ...                   metadata={"format": "pt"})  # doctest: +SKIP
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tokembed.artifacts.safetensors_header import DTYPE_CODES

if TYPE_CHECKING:
    import torch

__all__ = ["write_safetensors"]

# Copy in blocks so a non-contiguous or non-CPU tensor never needs a full second copy.
_BLOCK_BYTES = 64 << 20


def _raw(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as a flat uint8 view (a copy only for non-contiguous/non-CPU data)."""
    import torch

    flat = t.detach().reshape(-1)
    if flat.device.type != "cpu":
        flat = flat.cpu()
    return flat.contiguous().view(torch.uint8)


def write_safetensors(
    path: Path, tensors: Mapping[str, torch.Tensor], *, metadata: Mapping[str, str]
) -> None:
    """Write ``tensors`` and string ``metadata`` to ``path`` in the safetensors format.

    Tensors are stored in name order; ``path`` is written in place (wrap the call in
    :func:`tokembed.files.atomic.replace_with` for an all-or-nothing file).

    Raises:
        KeyError: a dtype the format has no code for (complex, unsigned > 8 bits).
    """
    names = sorted(tensors)
    header: dict[str, object] = {"__metadata__": dict(metadata)}
    offset = 0
    for name in names:
        t = tensors[name]
        size = t.numel() * t.element_size()
        header[name] = {
            "dtype": DTYPE_CODES[str(t.dtype).removeprefix("torch.")],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for name in names:
            t = tensors[name]
            if t.numel() == 0:
                continue
            if t.is_contiguous() and t.device.type == "cpu":
                f.write(_raw(t).numpy().data)
                continue
            rows = t.reshape(t.shape[0], -1) if t.dim() > 0 else t.reshape(1, 1)
            step = max(1, _BLOCK_BYTES // max(1, rows[0].numel() * t.element_size()))
            for start in range(0, rows.shape[0], step):
                f.write(_raw(rows[start : start + step]).numpy().data)
