"""Weight-tying, checkpoint and output-ownership failures: each one triggered and caught by code.

One test per scenario, named after it. Scenarios on tensor-parallel shards and
pipeline replicas run on real gloo process groups (2 ranks).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from _models import TinyLM, train_steps
from safetensors.torch import save_file
from torch import nn

from tokembed.checkpoint import (
    check_packs_tied,
    check_registration,
    check_replica_groups,
    derive_pack,
    load_checkpoint,
    require_ties,
    save_checkpoint,
    tie,
    tie_report,
    verify_aliases,
)
from tokembed.checkpoint.alias import AliasGraph
from tokembed.embedding import TokenEmbedding
from tokembed.embedding.variants import FactorizedEmbedding
from tokembed.errors import CheckpointError, TokembedError
from tokembed.parallel import TiedReplica, VocabParallelEmbedding, VocabParallelLMHead

# The gloo harness lives with the parallel tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parallel"))
from _harness import run_ranks


def _code(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(TokembedError) as e:
        fn(*args, **kwargs)
    return e.value.code


@pytest.mark.failure_lab("6.1")
def test_equal_values_are_mistaken_for_one_parameter() -> None:
    """Equal values are mistaken for one parameter.

    embed and lm_head hold equal values (a copy) while the config claims a tie.
    """
    model = TinyLM(tied=False)
    with torch.no_grad():
        model.lm_head.weight.copy_(model.embed.weight)
    claims = {("embed.weight", "lm_head.weight"): True}
    assert tie_report(model, claims=claims).problems[0].kind == "equal_values"
    assert _code(require_ties, model, claims=claims) == "TIE_NOT_SHARED"


@pytest.mark.failure_lab("6.2")
def test_a_checkpoint_stores_values_but_loses_the_alias_graph(tmp_path: Path) -> None:
    """A checkpoint stores values but loses the alias graph.

    Two keys copied into two Parameters; the alias is never reapplied.
    """
    source = TinyLM(tied=True)
    lost = TinyLM(tied=False)
    lost.load_state_dict(source.state_dict())
    graph = AliasGraph.from_aliases({"lm_head.weight": "embed.weight"})
    assert _code(verify_aliases, lost, graph) == "ALIAS_GRAPH_LOST"
    kept = TinyLM(tied=False)
    load_checkpoint(kept, save_checkpoint(source, tmp_path / "c.safetensors"), retie=True)
    verify_aliases(kept, graph)


@pytest.mark.failure_lab("6.3")
def test_two_declared_alias_keys_contain_different_values(tmp_path: Path) -> None:
    """Two declared alias keys contain different values.

    The file has embed and lm_head with different values; the model ties them.
    """
    path = tmp_path / "untied.safetensors"
    save_file({k: v.contiguous() for k, v in TinyLM(tied=False).state_dict().items()}, str(path))
    assert _code(load_checkpoint, TinyLM(tied=True), path) == "DIVERGENT_ALIAS_VALUES"


@pytest.mark.failure_lab("6.4")
def test_the_optimizer_is_built_before_an_alias_is_restored(tmp_path: Path) -> None:
    """The optimizer is built before an alias is restored.

    The optimizer keeps the replaced lm_head Parameter; forward uses the embedding.
    """
    source = TinyLM(tied=True)
    adam = torch.optim.Adam(source.parameters())
    train_steps(source, adam)
    path = save_checkpoint(source, tmp_path / "c.safetensors", optimizer=adam)
    target = TinyLM(tied=False)
    early = torch.optim.Adam(target.parameters())
    load_checkpoint(target, path, retie=True)
    assert _code(check_registration, target, early) == "STALE_OPTIMIZER_PARAMETER"


@pytest.mark.failure_lab("6.5")
def test_one_tied_parameter_is_registered_twice_with_the_optimizer() -> None:
    """One tied Parameter is registered twice with the optimizer.

    Both role names of one tied weight end up in the param groups.
    """
    model = TinyLM(tied=True)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    sgd.param_groups[0]["params"].append(model.lm_head.weight)
    assert _code(check_registration, model, sgd) == "DUPLICATE_OPTIMIZER_REGISTRATION"


@pytest.mark.failure_lab("6.6")
def test_a_factorized_lexical_table_is_tied_directly_to_a_hidden_width_head() -> None:
    """A factorized lexical table is tied directly to a hidden-width head.

    [V, D] lexical rows claimed tied to a [V, H] head (same V, D != H).
    """
    model = nn.Module()
    model.embed = FactorizedEmbedding(11, 3, 4)
    model.lm_head = nn.Linear(4, 11, bias=False)
    claims = {("embed.lookup.weight", "lm_head.weight"): True}
    assert _code(require_ties, model, claims=claims) == "TIE_WIDTH_MISMATCH"
    pair = ("embed.lookup.weight", "lm_head.weight")
    assert _code(tie, model, keep="input", pair=pair) == "TIE_WIDTH_MISMATCH"


@pytest.mark.failure_lab("6.7")
def test_source_and_target_tables_are_tied_from_equal_row_counts() -> None:
    """Source and target tables are tied from equal row counts.

    Two [V, H] input tables bound to different tokenizers.
    """
    model = nn.Module()
    model.src = TokenEmbedding(11, 4, address_hash="sha256:" + "1" * 64)
    model.tgt = TokenEmbedding(11, 4, address_hash="sha256:" + "2" * 64)
    pair = ("src.weight", "tgt.weight")
    assert _code(tie, model, keep="input", pair=pair) == "VOCABULARY_IDENTITY_MISMATCH"


class _PermutedRowsHead(nn.Module):
    """A third-party row-sharded head whose group lists ranks in reverse order."""

    def __init__(self, emb: VocabParallelEmbedding) -> None:
        super().__init__()
        start, end = emb.intervals[emb.world_size - 1 - emb.rank]
        self.num_embeddings, self.vocab_start, self.vocab_end = emb.num_embeddings, start, end
        self.weight = nn.Parameter(torch.zeros(end - start, emb.embedding_dim))


def _partition_codes(rank: int, world_size: int) -> list[Any]:
    torch.manual_seed(0)
    model = nn.Module()
    model.emb = VocabParallelEmbedding(10, 4)
    model.head = VocabParallelLMHead(4, 10, tie_to=model.emb)
    tied = tie_report(model).pairs
    model.head = _PermutedRowsHead(model.emb)
    claims = {("emb.weight", "head.weight"): True}
    permuted = tie_report(model, claims=claims).problems
    return [[(p.kind, p.code) for p in tied], [(p.code, p.detail) for p in permuted]]


@pytest.mark.failure_lab("6.8")
@pytest.mark.distributed
def test_tensor_parallel_input_and_output_shards_use_different_row_intervals() -> None:
    """Tensor-parallel input and output shards use different row intervals.

    Rank r's head rows are rank R-1-r's embedding rows; every local shape is valid.
    """
    results = run_ranks(_partition_codes, 2)
    for rank, (tied, permuted) in enumerate(results):
        assert tied == [("same_parameter", None)]  # one local Parameter per rank
        rows = [(0, 5), (5, 10)]
        assert permuted == [
            ("TIE_PARTITION_MISMATCH", f"rows {rows[rank]} vs {rows[1 - rank]} on this rank")
        ]


def _stage_grads(rank: int, table: nn.Parameter) -> None:
    """Stage 0 looks rows up; stage 1 classifies fixed hidden rows: two different gradients."""
    if rank == 0:
        (table[torch.tensor([1, 3, 1])] ** 2).sum().backward()
    else:
        hidden = torch.linspace(-1, 1, 8).reshape(2, 4)
        F.cross_entropy(hidden @ table.t(), torch.tensor([2, 5])).backward()


def _replica_run(rank: int, world_size: int, mode: str) -> Any:
    torch.manual_seed(0)
    holder = nn.Module()
    holder.table = nn.Parameter(torch.randn(6, 4))  # same init on both stages
    replica = TiedReplica(holder.table, group=None, authority=0)
    adam = torch.optim.Adam([holder.table], lr=0.1)
    if mode == "reduced_twice":
        singles = [dist.new_group([0]), dist.new_group([1])]
        check_replica_groups(replica, data_group=singles[rank])  # a proper DP group passes
        _stage_grads(rank, holder.table)
        replica.reconcile_grads()
        once = holder.table.grad.clone()  # type: ignore[union-attr]
        dist.all_reduce(holder.table.grad, group=None)  # the DP all-reduce over the same ranks
        doubled = torch.equal(holder.table.grad, 2 * once)
        try:
            check_replica_groups(replica, data_group=None)
        except CheckpointError as exc:
            return (exc.code, doubled)
        return (None, doubled)
    for _ in range(2):
        adam.zero_grad()
        _stage_grads(rank, holder.table)
        if mode == "reconciled":
            replica.reconcile_grads()
        adam.step()
    if mode == "values_synced":
        replica.sync_values()  # a periodic broadcast: values agree, Adam moments do not
    pair = tie_report(holder, replicas={"table": replica}, optimizer=adam).pairs[0]
    return (pair.code, pair.detail.split(":")[0])


@pytest.mark.failure_lab("6.9")
@pytest.mark.distributed
def test_pipeline_replicas_reduce_values_but_not_the_two_gradient_paths() -> None:
    """Pipeline replicas reduce values but not the two gradient paths.

    Each stage steps only its own role's gradient; a reconciled run stays equal.
    """
    assert (
        run_ranks(_replica_run, 2, "unreconciled")
        == [("REPLICA_DIVERGED", "tied replicas differ in values")] * 2
    )
    assert run_ranks(_replica_run, 2, "reconciled")[0][0] is None


@pytest.mark.failure_lab("6.10")
@pytest.mark.distributed
def test_pipeline_replica_values_match_while_optimizer_moments_differ() -> None:
    """Pipeline replica values match while optimizer moments differ.

    Values broadcast after unreconciled steps: equal tensors, different Adam moments.
    """
    assert (
        run_ranks(_replica_run, 2, "values_synced")
        == [("REPLICA_DIVERGED", "tied replicas differ in optimizer state")] * 2
    )


@pytest.mark.failure_lab("6.11")
@pytest.mark.distributed
def test_the_reconciled_pipeline_gradient_is_reduced_twice() -> None:
    """The reconciled pipeline gradient is reduced twice.

    The embedding group doubles as the data-parallel group: the sum is taken twice.
    """
    assert (
        run_ranks(_replica_run, 2, "reduced_twice")
        == [("REPLICA_GRADIENT_REDUCED_TWICE", True)] * 2
    )


@pytest.mark.failure_lab("6.12")
def test_input_and_output_roles_create_independent_quantized_packs_and_call_them_tied() -> None:
    """Input and output roles create independent quantized packs and call them tied.

    Each role quantized from its own copy (one of them trained on): two physical tables.
    """
    table = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    drifted = table.clone()
    drifted[2] += 0.5
    packs = [derive_pack(table, role="input"), derive_pack(drifted, role="output")]
    assert _code(check_packs_tied, table, packs) == "QUANTIZED_PACKS_NOT_TIED"
