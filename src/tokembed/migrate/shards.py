"""Vocabulary-parallel shards migrated through the canonical logical table.

Row shards are a physical placement of one logical table; a migration changes
the logical table. Editing each rank's shard on its own passes every local
shape check while the rows land in the wrong places, because the ceil-chunk
intervals of V1 rows are not those of V0 rows. :func:`migrate_vocab_parallel`
therefore (collectively, on every rank of the group):

1. gathers the canonical [V0, d] table (and each row-shaped optimizer state),
2. migrates it with the same row map and initializer values as a single
   process would (:func:`~tokembed.migrate.apply.migrate_rows`),
3. cuts the result at the intervals of V1 (an exact cover of [0, V1)) into a new
   :class:`~tokembed.parallel.VocabParallelEmbedding`; a tied
   :class:`~tokembed.parallel.VocabParallelLMHead` is rebuilt on the same
   Parameter, so input and output intervals coincide;
4. proves the reconstruction: gathering the new shards gives back the
   canonical migrated table bit for bit (:func:`check_reconstruction`).

Memory: every rank holds the full old and new table during the conversion
(the auditable schedule; a streaming converter would have to reproduce it).

Example::

    >>> new_emb, new_head = migrate_vocab_parallel(emb, rows, values, head=head)  # doctest: +SKIP

Raises ParallelError SHARD_LAYOUT_MISMATCH (reconstruction differs),
SHARD_GAP / SHARD_OVERLAP (from the cover check); CheckpointError as
:func:`~tokembed.migrate.apply.migrate_rows`.
"""

from __future__ import annotations

import torch
from torch import nn

from tokembed.errors import ParallelError
from tokembed.migrate.apply import migrate_rows
from tokembed.migrate.optimizer import as_bits, check_preserved, copy_exact_
from tokembed.migrate.rowmap import RowMap
from tokembed.parallel.collectives import all_gather_uneven
from tokembed.parallel.intervals import validate_cover
from tokembed.parallel.lm_head import VocabParallelLMHead
from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

__all__ = ["check_reconstruction", "migrate_vocab_parallel"]


def _sizes(layer: VocabParallelEmbedding | VocabParallelLMHead) -> list[int]:
    return [end - start for start, end in layer.intervals]


def check_reconstruction(
    layer: VocabParallelEmbedding | VocabParallelLMHead,
    canonical: torch.Tensor,
    *,
    name: str = "table",
) -> None:
    """Refuse (SHARD_LAYOUT_MISMATCH) unless the gathered shards equal ``canonical`` bit for bit.

    Collective over ``layer.group``. Checks the exact cover of the layer's intervals first.
    """
    validate_cover(layer.intervals, layer.num_embeddings)
    full = layer.gather_weight()
    same = full.shape == canonical.shape and full.dtype == canonical.dtype
    if same and torch.equal(as_bits(full), as_bits(canonical.contiguous())):
        return
    row = (
        int((as_bits(full) != as_bits(canonical.contiguous())).any(dim=1).nonzero()[0, 0])
        if same
        else min(full.shape[0], canonical.shape[0])
    )
    raise ParallelError(
        "SHARD_LAYOUT_MISMATCH",
        f"{name}: the shards do not reconstruct the migrated logical table (first bad row {row})",
        value=row,
        fix="migrate the canonical table and re-cut it at the new intervals "
        "(migrate_vocab_parallel); never edit shards one by one",
    )


def _moments(
    optimizer: torch.optim.Optimizer | None,
    old: nn.Parameter,
    new: nn.Parameter,
    rows: RowMap,
    sizes: list[int],
    group: object,
    interval: tuple[int, int],
) -> None:
    if optimizer is None:
        return
    for g in optimizer.param_groups:
        g["params"] = [new if p is old else p for p in g["params"]]
    state = optimizer.state.pop(old, {})
    moved: dict[str, object] = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape == old.shape:
            full = all_gather_uneven(value, sizes, group=group)  # type: ignore[arg-type]
            grown = full.new_zeros((rows.new_rows, *full.shape[1:]))
            copy_exact_(grown, full, rows)
            check_preserved(full, grown, rows, key)
            moved[key] = grown[interval[0] : interval[1]].clone()
        else:
            moved[key] = value
    if moved:
        optimizer.state[new] = moved


def migrate_vocab_parallel(
    emb: VocabParallelEmbedding,
    rows: RowMap,
    values: torch.Tensor,
    *,
    head: VocabParallelLMHead | None = None,
    head_values: torch.Tensor | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> tuple[VocabParallelEmbedding, VocabParallelLMHead | None]:
    """New layers over the same group holding the migrated rows (call on every rank).

    ``values`` (and ``head_values`` for an untied head) are the initialized rows,
    identical on every rank (compute them from the gathered table with a fixed seed).
    A tied head (``head.weight is emb.weight``) is rebuilt on the new embedding's Parameter.
    """
    sizes = _sizes(emb)
    full = emb.gather_weight()  # [V0, d], canonical
    grown = migrate_rows(full, rows, values, name="input")  # [V1, d]
    plain = nn.Embedding(rows.new_rows, emb.embedding_dim, dtype=grown.dtype)
    with torch.no_grad():
        plain.weight.copy_(grown)
    pad = emb.padding_idx
    plain.padding_idx = (
        next((v for j, v in rows.pairs if j == pad), None) if pad is not None else None
    )
    new_emb = VocabParallelEmbedding.from_embedding(
        plain,
        group=emb.group,
        sequence_parallel=emb.sequence_parallel,
        sequence_dim=emb.sequence_dim,
    )
    interval = (new_emb.vocab_start, new_emb.vocab_end)
    _moments(optimizer, emb.weight, new_emb.weight, rows, sizes, emb.group, interval)
    check_reconstruction(new_emb, grown, name="input")
    if head is None:
        return new_emb, None
    if head.weight is emb.weight:
        new_head = VocabParallelLMHead(
            emb.embedding_dim, rows.new_rows, group=emb.group, tie_to=new_emb
        )
        assert new_head.weight is new_emb.weight
        assert new_head.intervals == new_emb.intervals
        return new_emb, new_head
    assert head_values is not None, "an untied head needs its own initialized rows"
    out_full = migrate_rows(head.gather_weight(), rows, head_values, name="output")
    linear = nn.Linear(head.embedding_dim, rows.new_rows, bias=False, dtype=out_full.dtype)
    with torch.no_grad():
        linear.weight.copy_(out_full)
    new_head = VocabParallelLMHead.from_linear(linear, group=head.group)
    _moments(optimizer, head.weight, new_head.weight, rows, _sizes(head), head.group, interval)
    check_reconstruction(new_head, out_full, name="output")
    return new_emb, new_head
