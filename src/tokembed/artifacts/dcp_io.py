"""Writing and reading distributed checkpoint folders, one block of a logical tensor at a time.

Every sharded engine keeps a logical tensor as blocks: an FSDP2 parameter is a
``DTensor`` whose rank holds a row range, a vocabulary-parallel table holds rows
``[s_r, e_r)`` of ``[V, d]``, and a vocabulary-parallel table inside FSDP2 holds
a row range of that range. :class:`TensorPiece` names one such block (the
logical tensor's name and global shape, where the block starts, the local
tensor), so that one writer serves all of them: :func:`write_dcp` writes the
pieces of every rank as one ``torch.distributed.checkpoint`` folder (DCP's own
format: ``.metadata`` plus ``__<rank>_<n>.distcp`` files, so plain ``dcp.load``
reads it), plus the tokembed record ``tokembed.json``, into a temporary sibling
folder that is renamed into place once everything is written. :func:`read_dcp`
fills pieces of any other layout from it (DCP computes which saved chunks
overlap which piece), without a collective; :func:`read_dcp_tensor` reads one
whole tensor, or a row range of it, in one process.

This is the project's one way to write sharded state: model checkpoints
(:mod:`tokembed.checkpoint`), vocabulary shards (:mod:`tokembed.parallel.reshard`)
and migrated checkpoints (:mod:`tokembed.migrate`) all come through here.
torch is imported when these functions are called.

Example::

    >>> piece = TensorPiece(name="weight", shape=(131, 8), offset=(66, 0), tensor=local)
    >>> write_dcp("ckpt", [piece], record={"aliases": {}}, group=tp)  # doctest: +SKIP
    >>> read_dcp_tensor("ckpt", "weight", rows=(0, 33)).shape  # doctest: +SKIP
    torch.Size([33, 8])

Raises UsageError OUTPUT_EXISTS (the folder exists) and INVALID_ARGUMENT (a piece
outside its tensor); CheckpointError as :mod:`tokembed.artifacts.dcp_metadata`;
EmbeddingError SHAPE_MISMATCH (a piece of another global shape than the saved tensor).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokembed.artifacts.dcp_metadata import (
    RECORD_NAME,
    metadata_digest,
    read_dcp_metadata,
)
from tokembed.artifacts.safetensors_header import CHECKPOINT_META_KEY, CHECKPOINT_VERSION
from tokembed.errors import CheckpointError, EmbeddingError, TokembedError, UsageError
from tokembed.files.atomic import (
    check_new_folder,
    new_temp_folder,
    publish_folder,
    write_bytes_atomic,
)

if TYPE_CHECKING:
    import torch

__all__ = ["TensorPiece", "read_dcp", "read_dcp_tensor", "write_dcp"]

Producer = Callable[["TensorPiece"], "torch.Tensor"]


@dataclass(frozen=True, kw_only=True)
class TensorPiece:
    """One block of a logical tensor on this process.

    ``shape`` is the logical (global) shape, ``offset`` where the block starts in
    it, ``tensor`` the block (``[sizes]``): the data to write, or the destination
    to read into. For data produced while writing (:func:`write_dcp`'s
    ``produce``), ``tensor`` is a meta tensor of the block's shape and dtype.

    Raises:
        UsageError INVALID_ARGUMENT: the block does not lie inside ``shape``.
    """

    name: str
    shape: tuple[int, ...]
    offset: tuple[int, ...]
    tensor: torch.Tensor

    def __post_init__(self) -> None:
        sizes = tuple(self.tensor.shape)
        inside = len(self.shape) == len(self.offset) == len(sizes) and all(
            o >= 0 and o + s <= n for o, s, n in zip(self.offset, sizes, self.shape, strict=True)
        )
        if not inside:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"piece of {self.name!r} at {list(self.offset)} with sizes {list(sizes)} "
                f"does not lie inside {list(self.shape)}",
                value=self.name,
                fix="give each piece its global shape and the offset of its first element",
            )

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self.tensor.shape)

    @property
    def empty(self) -> bool:
        """A block with no elements (an empty tail shard): nothing to write or read."""
        return self.tensor.dim() > 0 and self.tensor.numel() == 0


@cache
def _planners() -> tuple[type[Any], type[Any]]:
    """The save and load planners (defined on first use: torch is imported only then)."""
    import torch
    from torch.distributed.checkpoint import DefaultLoadPlanner, DefaultSavePlanner
    from torch.distributed.checkpoint.metadata import (
        ChunkStorageMetadata,
        MetadataIndex,
        TensorProperties,
        TensorStorageMetadata,
    )
    from torch.distributed.checkpoint.planner import (
        LoadPlan,
        SavePlan,
        TensorWriteData,
        WriteItem,
        WriteItemType,
    )
    from torch.distributed.checkpoint.planner_helpers import create_read_items_for_chunk_list

    def chunk(piece: TensorPiece) -> Any:
        return ChunkStorageMetadata(offsets=torch.Size(piece.offset), sizes=torch.Size(piece.sizes))

    class SavePieces(DefaultSavePlanner):
        """Write items straight from the pieces (their global offsets), data resolved lazily."""

        def __init__(self, pieces: Sequence[TensorPiece], produce: Producer | None) -> None:
            super().__init__(flatten_state_dict=False, flatten_sharded_tensors=False)
            self.pieces = {(p.name, p.offset): p for p in pieces if not p.empty}
            self.produce = produce

        def create_local_plan(self) -> Any:
            items = [
                WriteItem(
                    index=MetadataIndex(p.name, p.offset),
                    type=WriteItemType.TENSOR if p.sizes == p.shape else WriteItemType.SHARD,
                    tensor_data=TensorWriteData(
                        chunk=chunk(p),
                        properties=TensorProperties(dtype=p.tensor.dtype),
                        size=torch.Size(p.shape),
                    ),
                )
                for p in self.pieces.values()
            ]
            self.plan = SavePlan(items)
            return self.plan

        def resolve_data(self, write_item: Any) -> Any:
            piece = self.pieces[(write_item.index.fqn, tuple(write_item.index.offset))]
            data = piece.tensor if self.produce is None else self.produce(piece)
            return data.detach()

    class LoadPieces(DefaultLoadPlanner):
        """Read items for the pieces' blocks from whatever chunks were saved."""

        def __init__(self, pieces: Sequence[TensorPiece]) -> None:
            super().__init__(flatten_state_dict=False, flatten_sharded_tensors=False)
            self.pieces = [p for p in pieces if not p.empty]
            self.targets = {(p.name, p.offset): p.tensor for p in self.pieces}

        def create_local_plan(self) -> Any:
            assert self.metadata is not None
            requests = []
            for p in self.pieces:
                saved = self.metadata.state_dict_metadata[p.name]  # checked by read_dcp
                assert isinstance(saved, TensorStorageMetadata)
                requests += create_read_items_for_chunk_list(p.name, saved, [chunk(p)])
            return LoadPlan(requests)

        def lookup_tensor(self, index: Any) -> Any:
            return self.targets[(index.fqn, tuple(index.offset))]

    return SavePieces, LoadPieces


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # DCP warns on every process-local save or load; here process-local is the intent.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _is_distributed(group: Any) -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def _share(value: Any, group: Any) -> Any:
    """``value`` of the group's first rank, on every rank (pickled; errors travel too)."""
    import torch.distributed as dist

    box = [value]
    src = dist.get_global_rank(group, 0) if group is not None else 0
    dist.broadcast_object_list(box, src=src, group=group)
    return box[0]


def write_dcp(
    folder: str | os.PathLike[str],
    pieces: Iterable[TensorPiece],
    *,
    record: dict[str, Any],
    group: Any = None,
    produce: Producer | None = None,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Write this rank's ``pieces`` into the new DCP folder ``folder``; returns its path.

    Collective over ``group`` (the default group; one process when torch.distributed
    is not initialized): call it on every rank with the same ``folder``. Pieces held
    by several ranks (replicated tensors) are written once. Every logical tensor
    must be covered exactly once by the union of the pieces. ``record`` holds the
    tokembed fields (``aliases``, ``address_hash``, ``optimizer``, ``layout``, ...);
    the tensors, their shapes and dtypes and the ``.metadata`` digest are added from
    what was written. ``produce(piece)``, when given, returns a piece's data at the
    moment it is written (pieces are written in the given order, one at a time).

    Raises:
        UsageError OUTPUT_EXISTS: ``folder`` exists or is one of ``inputs``.
        torch's CheckpointException: a rank failed to write (nothing is left behind).
    """
    import torch.distributed.checkpoint as dcp

    planned = list(pieces)
    distributed = _is_distributed(group)
    first = not distributed or _group_rank(group) == 0
    target = Path(folder).resolve()
    tmp: Path | TokembedError | None = None
    if first:
        try:
            tmp = new_temp_folder(check_new_folder(target, inputs=[Path(p) for p in inputs]))
        except TokembedError as error:
            tmp = error
    if distributed:
        tmp = _share(tmp, group)
    if isinstance(tmp, TokembedError):
        raise tmp
    assert isinstance(tmp, Path)
    save_planner, _ = _planners()
    try:
        with _quiet():
            dcp.save(
                {},
                storage_writer=dcp.FileSystemWriter(tmp, thread_count=1, sync_files=True),
                planner=save_planner(planned, produce),
                process_group=group,
                no_dist=not distributed,
            )
        status: BaseException | None = None
        if first:
            try:
                _finish(tmp, target, record)
            except BaseException as error:
                status = error
        if distributed:
            status = _share(status, group)
        if status is not None:
            raise status
    except BaseException:
        if first:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _group_rank(group: Any) -> int:
    import torch.distributed as dist

    return dist.get_rank(group)


def _finish(tmp: Path, target: Path, record: dict[str, Any]) -> None:
    """Add the tensors and the ``.metadata`` digest to the record, write it, publish the folder."""
    meta = read_dcp_metadata(tmp)
    tensors = {
        name: {"shape": list(e.size), "dtype": str(e.properties.dtype).removeprefix("torch.")}
        for name, e in sorted(meta.state_dict_metadata.items())
    }
    full = {
        "format": CHECKPOINT_META_KEY,
        "version": CHECKPOINT_VERSION,
        "aliases": {},
        "address_hash": None,
        "optimizer": None,
        "layout": {},
        **record,
        "tensors": tensors,
        "metadata_sha256": metadata_digest(tmp),
    }
    write_bytes_atomic(tmp / RECORD_NAME, json.dumps(full, indent=1, sort_keys=True).encode())
    publish_folder(tmp, target)


def read_dcp(
    folder: str | os.PathLike[str], pieces: Iterable[TensorPiece], *, metadata: Any = None
) -> None:
    """Fill every piece's tensor from the DCP folder (any saved layout); no collective.

    ``metadata`` is the folder's checked :func:`~tokembed.artifacts.dcp_metadata.read_dcp_metadata`
    (read when not given). Values are cast to each piece's dtype (check casts first).

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: a piece names a tensor the folder lacks,
            or a data file's bytes are damaged (the pieces read so far hold new values).
        EmbeddingError SHAPE_MISMATCH: a piece's global shape is not the saved one.
        As :func:`~tokembed.artifacts.dcp_metadata.read_dcp_metadata`.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    root = Path(folder)
    meta = read_dcp_metadata(root) if metadata is None else metadata
    wanted = list(pieces)
    for p in wanted:
        saved = meta.state_dict_metadata.get(p.name)
        if saved is None or not hasattr(saved, "size"):
            raise CheckpointError(
                "MALFORMED_CHECKPOINT",
                f"{root} holds no tensor {p.name!r}",
                value=p.name,
                fix="load the checkpoint that holds this tensor",
            )
        if tuple(saved.size) != p.shape:
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"{p.name!r} is saved as {list(saved.size)}, the target is {list(p.shape)}",
                value=(p.name, tuple(saved.size)),
                fix="load into the architecture the checkpoint was saved from",
            )
    _, load_planner = _planners()
    try:
        with _quiet():
            dcp.load(
                {},
                storage_reader=dcp.FileSystemReader(root),
                planner=load_planner(wanted),
                no_dist=True,
            )
    except TokembedError:
        raise
    except (Exception, CheckpointException) as error:  # damaged bytes in a data file
        raise CheckpointError(
            "MALFORMED_CHECKPOINT",
            f"{root}: a data file is damaged ({_cause(error)})",
            value=str(root),
            fix="load an intact copy of the checkpoint (the data files carry no checksum: "
            "keep copies verified by the file system or the transfer)",
        ) from None


def _cause(error: BaseException) -> str:
    """One line naming what failed: DCP wraps each rank's exception with its traceback."""
    failures = getattr(error, "failures", None)
    if failures:
        error = next(iter(failures.values()))[0]
    first = next((line for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {first[:160]}"


def read_dcp_tensor(
    folder: str | os.PathLike[str],
    name: str,
    *,
    rows: tuple[int, int] | None = None,
    metadata: Any = None,
) -> torch.Tensor:
    """One saved tensor (or its rows ``[start, end)``), read in this process.

    Reads only the saved chunks that overlap the rows.

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: no such tensor.
        UsageError INVALID_ARGUMENT: ``rows`` outside the tensor's first dimension.
    """
    import torch

    root = Path(folder)
    meta = read_dcp_metadata(root) if metadata is None else metadata
    saved = meta.state_dict_metadata.get(name)
    if saved is None or not hasattr(saved, "size"):
        raise CheckpointError(
            "MALFORMED_CHECKPOINT",
            f"{root} holds no tensor {name!r}",
            value=name,
            fix="name a tensor the checkpoint holds (read_dcp_record lists them)",
        )
    shape = tuple(saved.size)
    start, end = (0, shape[0] if shape else 0) if rows is None else rows
    if shape and not 0 <= start <= end <= shape[0]:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"rows [{start}, {end}) are outside {name!r}'s [0, {shape[0]})",
            value=(start, end),
            fix="ask for rows inside the saved tensor",
        )
    out = torch.empty((end - start, *shape[1:]) if shape else (), dtype=saved.properties.dtype)
    offset = (start, *([0] * (len(shape) - 1))) if shape else ()
    read_dcp(root, [TensorPiece(name=name, shape=shape, offset=offset, tensor=out)], metadata=meta)
    return out
