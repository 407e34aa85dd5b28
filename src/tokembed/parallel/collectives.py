"""Small wrappers over torch.distributed: the parallel layers' collectives (gloo-tested).

Public because other packages gather vocabulary-parallel state the same way
(:mod:`tokembed.migrate.shards` gathers shards and their optimizer moments with
:func:`all_gather_uneven`).

What gloo in torch 2.13 supports, probed on this machine with real process
groups: ``all_to_all_single`` with uneven split sizes, ``reduce_scatter_single``
and ``all_gather_single`` (equal chunks only). ``all_gather`` with uneven
tensor sizes is refused by gloo, so :func:`all_gather_uneven` pads every shard to the
ceil chunk, gathers, and trims by the known sizes.

:func:`agree_on_error` makes a local admission failure collective: each rank
contributes one small integer (0 = fine, else the index of its error code), one
all-reduce shares them, and every rank raises. Without it a rank that refused
its input would leave its peers blocked in the next collective until the
process group's timeout.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

from tokembed.errors import EmbeddingError, ParallelError, TokembedError

__all__ = [
    "agree_on_error",
    "all_gather_uneven",
    "exchange_rows",
    "group_rank",
    "group_size",
]

# Codes a rank may refuse its local input with before the first collective, with the
# one class each code is raised under (peers raise the same class and code). The
# lookup contract's codes come first; agreement sends the index into this table
# (+1), so every rank can name the code.
_AGREED: dict[str, type[TokembedError]] = {
    "ID_OUT_OF_RANGE": EmbeddingError,
    "INDEX_DTYPE_MISMATCH": EmbeddingError,
    "DEVICE_MISMATCH": EmbeddingError,
    "ADDRESS_HASH_MISMATCH": EmbeddingError,
    "PAD_ID_INVALID": EmbeddingError,
    "PAD_ROW_NOT_ZERO": EmbeddingError,
    "OPERATOR_CONTRACT_MISMATCH": EmbeddingError,
    "SEQUENCE_NOT_DIVISIBLE": ParallelError,
}
_AGREED_CODES: tuple[str, ...] = tuple(_AGREED)


def group_size(group: ProcessGroup | None) -> int:
    """Number of ranks in ``group`` (the default group when None)."""
    return dist.get_world_size(group)


def group_rank(group: ProcessGroup | None) -> int:
    """This process's rank inside ``group``."""
    return dist.get_rank(group)


def agree_on_error(check: Callable[[], None], *, group: ProcessGroup | None) -> None:
    """Run a local ``check`` on every rank, then raise on every rank if any rank failed.

    A rank whose check raised re-raises its own error; the others raise the
    same class with the same code, naming the first failing rank (``value`` is
    that rank). Costs one all-reduce of ``world_size`` int64 values.

    Raises:
        the local ``EmbeddingError``/``ParallelError`` on the failing ranks, the
        same class and code on the others.
    """
    local: TokembedError | None = None
    try:
        check()
    except (EmbeddingError, ParallelError) as error:
        if error.code not in _AGREED or not isinstance(error, _AGREED[error.code]):
            raise
        local = error
    world, rank = group_size(group), group_rank(group)
    flags = torch.zeros(world, dtype=torch.int64)  # [R]: 0 fine, k+1 = _AGREED_CODES[k]
    if local is not None:
        flags[rank] = _AGREED_CODES.index(local.code) + 1
    dist.all_reduce(flags, group=group)
    if local is not None:
        raise local
    bad = flags.nonzero()
    if bad.numel():
        first = int(bad[0, 0])
        code = _AGREED_CODES[int(flags[first]) - 1]
        raise _AGREED[code](
            code,
            f"rank {first} of the group refused its input with {code}; every rank stops here",
            value=first,
            fix=f"see rank {first}'s error for the offending value",
        )


def all_gather_uneven(
    local: torch.Tensor, sizes: list[int], *, group: ProcessGroup | None
) -> torch.Tensor:
    """Concatenate every rank's ``local`` along dim 0; rank r contributes ``sizes[r]`` rows.

    ``local``: [sizes[rank], *rest]; returns [sum(sizes), *rest] on every rank.
    """
    chunk = max(sizes)
    padded = local.new_zeros((chunk, *local.shape[1:]))  # [c, *rest]
    padded[: local.shape[0]] = local
    out = local.new_empty((len(sizes) * chunk, *local.shape[1:]))  # [R*c, *rest]
    dist.all_gather_single(out, padded, group=group)
    return torch.cat([out[r * chunk : r * chunk + n] for r, n in enumerate(sizes)], dim=0)


def exchange_rows(
    x: torch.Tensor, send: list[int], recv: list[int], *, group: ProcessGroup | None
) -> torch.Tensor:
    """all_to_all on dim 0: segment r of ``x`` (``send[r]`` rows) goes to rank r.

    ``x``: [sum(send), *rest]; returns [sum(recv), *rest], segments in source-rank order.
    """
    out = x.new_empty((sum(recv), *x.shape[1:]))  # [sum(recv), *rest]
    dist.all_to_all_single(out, x.contiguous(), recv, send, group=group)
    return out
