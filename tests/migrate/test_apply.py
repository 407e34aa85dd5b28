"""migrate_model on Llamas built from configs: tables, head, bias, ties and Adam state together."""

from __future__ import annotations

import copy

import pytest
import torch
from _fixtures import llama, populate_adam
from torch import nn

from tokembed.embedding.materialize import check_growth_prefix, grow_optimizer_state_
from tokembed.errors import CheckpointError, EmbeddingError
from tokembed.migrate import (
    NewRows,
    RowMap,
    VocabRoles,
    check_state_migration,
    check_vocab_axes,
    migrate_model,
    snapshot_state,
    vocab_roles,
)

V0, M = 40, 3


def _grow(added: int = M, old: int = V0) -> RowMap:
    return RowMap(old_rows=old, new_rows=old + added, source=tuple(range(old)) + (-1,) * added)


def _ids(vocab: int = V0) -> torch.Tensor:
    return torch.randint(0, vocab, (2, 10), generator=torch.Generator().manual_seed(5))


def test_untied_head_bias_and_adam_state_grow_together() -> None:
    model = llama(V0, tied=False, bias=True)
    opt = populate_adam(model, _ids())
    roles = vocab_roles(model)
    assert roles == VocabRoles(
        input="model.embed_tokens.weight", output="lm_head.weight", bias="lm_head.bias"
    )
    params = [model.get_parameter(n) for n in roles.names()]
    before = snapshot_state(opt, params)
    tables = [p.detach().clone() for p in params]
    result = migrate_model(model, _grow(), optimizer=opt, init=NewRows(name="mean"))
    assert result.tensors == roles.names() == result.optimizer_states
    for k, name in enumerate(roles.names()):
        new = model.get_parameter(name)
        assert new.shape[0] == V0 + M
        check_growth_prefix(tables[k], new.detach())  # the embedding package's prefix oracle
        check_state_migration(before[k], opt, new, _grow(), name=name)
        assert opt.state[new]["step"] is not None
    emb, head = model.get_parameter(roles.input), model.get_parameter(roles.output)
    for new_rows, table in ((emb.detach()[V0:], tables[0]), (head.detach()[V0:], tables[1])):
        mean = table.double().mean(0)
        ulp = torch.finfo(torch.float32).eps * float(mean.abs().max())
        assert float((new_rows - mean.float()).abs().max()) <= ulp
    assert (model.config.vocab_size, model.lm_head.out_features) == (V0 + M, V0 + M)
    assert model.model.embed_tokens.num_embeddings == V0 + M
    # The optimizer holds exactly the live parameters and trains them with new ids.
    live = {id(p) for p in model.parameters()}
    assert {id(p) for g in opt.param_groups for p in g["params"]} == live
    populate_adam(model, _ids(V0 + M), steps=1).step()
    assert [r.initializer for r in result.records].count("bias_mean") == M


def test_tied_table_is_migrated_once_and_the_tie_restored() -> None:
    model = llama(V0, tied=True)
    opt = populate_adam(model, _ids())
    old_step = float(opt.state[model.lm_head.weight]["step"])
    result = migrate_model(model, _grow(), optimizer=opt)
    assert result.tensors == ("model.embed_tokens.weight",)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    registered = [p for g in opt.param_groups for p in g["params"]]
    assert sum(p is model.lm_head.weight for p in registered) == 1
    assert float(opt.state[model.lm_head.weight]["step"]) == old_step


def test_ours_equals_resize_token_embeddings_on_old_rows_and_stays_near_its_new_rows() -> None:
    model = llama(V0, tied=False, bias=True)
    peer = copy.deepcopy(model)
    migrate_model(model, _grow(), init=NewRows(name="mean_cov", seed=0))
    peer.resize_token_embeddings(V0 + M, mean_resizing=True)
    for ours, theirs in (
        (model.model.embed_tokens, peer.model.embed_tokens),
        (model.lm_head, peer.lm_head),
    ):
        assert torch.equal(ours.weight.detach()[:V0], theirs.weight.detach()[:V0])
        old = ours.weight.detach()[:V0]
        # Both draw mean + N(0, 1e-9 cov): new rows differ by at most 2 x 6 sigma of that noise.
        sigma = float(old.var(dim=0, unbiased=False).max().sqrt()) * 1e-9**0.5
        eps = torch.finfo(torch.float32).eps * float(old.abs().max())
        gap = (ours.weight.detach()[V0:] - theirs.weight.detach()[V0:]).abs().max()
        assert float(gap) <= 12 * sigma + 4 * eps
    assert torch.equal(model.lm_head.bias.detach()[:V0], peer.lm_head.bias.detach()[:V0])


def test_row_age_records_old_step_on_exact_rows_only() -> None:
    model = llama(V0, tied=True)
    opt = populate_adam(model, _ids())
    migrate_model(model, _grow(), optimizer=opt, row_age=True)
    age = opt.state[model.lm_head.weight]["row_step"]
    assert age[:V0].eq(2.0).all()
    assert age[V0:].eq(0.0).all()


def test_permuted_map_moves_rows_and_logits_follow_the_ids() -> None:
    model = llama(V0, tied=False)
    peer = copy.deepcopy(model)
    perm = torch.randperm(V0, generator=torch.Generator().manual_seed(2)).tolist()
    rows = RowMap(old_rows=V0, new_rows=V0, source=tuple(perm))  # new row v = old row perm[v]
    migrate_model(model, rows)
    ids = _ids()
    new_ids = rows.map_ids(ids)
    with torch.no_grad():
        old_logits = peer(input_ids=ids).logits
        new_logits = model(input_ids=new_ids).logits
    src, dst = rows.index_tensors()
    assert torch.equal(new_logits[..., dst], old_logits[..., src])


@pytest.mark.failure_lab("3.9")
def test_embedding_grown_but_head_and_bias_left_behind_is_caught() -> None:
    """The embedding grows but the untied output head or bias does not."""
    model = llama(V0, tied=False, bias=True)
    roles = vocab_roles(model)
    model.set_input_embeddings(nn.Embedding(V0 + M, model.config.hidden_size))
    with pytest.raises(CheckpointError) as err:
        check_vocab_axes(model, roles, V0 + M)
    assert (err.value.code, err.value.value) == ("VOCAB_AXIS_STALE", ("lm_head.weight", V0))


@pytest.mark.failure_lab("3.10")
def test_step_reset_after_resizing_moments_is_caught() -> None:
    """Adam moments are resized but the step is reset."""
    model = llama(V0, tied=True)
    opt = populate_adam(model, _ids())
    weight = model.lm_head.weight
    before = snapshot_state(opt, [weight])[0]
    # A hand-made migration: moments padded correctly, but a fresh optimizer's step.
    migrate_model(model, _grow(), optimizer=opt)
    grown = model.lm_head.weight
    opt.state[grown]["step"] = torch.tensor(0.0)
    with pytest.raises(CheckpointError) as err:
        check_state_migration(before, opt, grown, _grow())
    assert err.value.code == "OPTIMIZER_STEP_RESET"


def test_corrupted_moment_row_is_caught() -> None:
    model = llama(V0, tied=True)
    opt = populate_adam(model, _ids())
    before = snapshot_state(opt, [model.lm_head.weight])[0]
    migrate_model(model, _grow(), optimizer=opt)
    opt.state[model.lm_head.weight]["exp_avg"][7, 0] += 1.0
    with pytest.raises(CheckpointError) as err:
        check_state_migration(before, opt, model.lm_head.weight, _grow())
    assert (err.value.code, err.value.value) == ("PRESERVED_ROW_CHANGED", ("table:exp_avg", 7, 7))


@pytest.mark.failure_lab("3.4")
def test_shared_embedding_assumed_over_separate_tables_is_caught() -> None:
    """Shared embedding assumed when the implementation uses separate tables."""
    model = llama(V0, tied=False)
    with torch.no_grad():
        model.lm_head.weight.copy_(model.model.embed_tokens.weight)  # equal values, two tensors
    roles = VocabRoles(input="model.embed_tokens.weight", output="lm_head.weight", tied=True)
    with pytest.raises(CheckpointError) as err:
        migrate_model(model, _grow(), roles=roles)
    assert err.value.code == "TIE_NOT_SHARED"
    assert "equal values" in err.value.message
    assert model.model.embed_tokens.weight.shape[0] == V0  # nothing was written


@pytest.mark.failure_lab("3.2")
def test_model_trained_for_another_tokenizer_is_refused() -> None:
    """Tokenizer/model mismatch (ids in range, rows trained for other tokens)."""
    model = llama(V0, tied=True)
    with pytest.raises(EmbeddingError) as err:
        migrate_model(
            model, _grow(), old_hash="sha256:" + "a" * 64, model_hash="sha256:" + "b" * 64
        )
    assert err.value.code == "ADDRESS_HASH_MISMATCH"


@pytest.mark.failure_lab("3.1")
def test_table_rows_other_than_the_map_are_refused() -> None:
    """Tokenizer vocabulary and embedding row count mismatch."""
    model = llama(V0 - 2, tied=True)
    with pytest.raises(CheckpointError) as err:
        migrate_model(model, _grow())
    assert err.value.code == "ROW_COUNT_MISMATCH"


def test_append_only_state_move_equals_grow_optimizer_state() -> None:
    """For pure growth the row-map move equals the embedding package's zero-padding growth."""
    model = llama(V0, tied=True)
    opt = populate_adam(model, _ids())
    twin = copy.deepcopy(opt.state_dict())
    migrate_model(model, _grow(), optimizer=opt)
    ours = opt.state[model.lm_head.weight]
    ref_model = llama(V0, tied=True)
    ref_opt = torch.optim.AdamW(ref_model.parameters(), lr=1e-2, weight_decay=0.1)
    ref_opt.load_state_dict(twin)
    old = ref_model.lm_head.weight
    grown = nn.Parameter(torch.cat([old.detach(), old.detach().new_zeros(M, old.shape[1])]))
    grow_optimizer_state_(ref_opt, old, grown)
    ref = ref_opt.state[grown]
    assert set(ours) == set(ref)
    for key in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(ours[key], ref[key])
    assert float(ours["step"]) == float(ref["step"])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e308])
def test_a_non_finite_bias_value_is_refused_before_any_table_changes(value: float) -> None:
    from tokembed.errors import UsageError

    model = llama(V0, tied=False, bias=True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(UsageError) as e:
        migrate_model(model, _grow(), bias="prior", bias_value=value)
    assert e.value.code == "INVALID_ARGUMENT"
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], v) for k, v in before.items())


def test_new_rows_that_would_be_non_finite_are_refused_and_nothing_changes() -> None:
    model = llama(V0, tied=False, bias=True)
    with torch.no_grad():
        model.lm_head.weight[3, 0] = float("inf")  # the mean of the head's rows is infinite
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(EmbeddingError) as e:
        migrate_model(model, _grow(), init=NewRows(name="mean"))
    assert e.value.code == "NON_FINITE_VALUES"
    assert "lm_head.weight" in e.value.message
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())
