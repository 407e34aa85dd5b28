"""freeze_rows closes the lookup, dense output, moment and weight-decay paths of old rows."""

from __future__ import annotations

import pytest
import torch
from _fixtures import llama, populate_adam

from tokembed.errors import CheckpointError, UsageError
from tokembed.migrate import RowMap, migrate_model
from tokembed.migrate.freeze import check_frozen, freeze_rows, rows_digest

V0, M = 40, 4


def _migrated(*, tied: bool, bias: bool = False) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = llama(V0, tied=tied, bias=bias)
    ids = torch.randint(0, V0, (2, 10), generator=torch.Generator().manual_seed(1))
    opt = populate_adam(model, ids)  # moments are nonzero on every row of the tables
    rows = RowMap(old_rows=V0, new_rows=V0 + M, source=tuple(range(V0)) + (-1,) * M)
    migrate_model(model, rows, optimizer=opt)
    return model, opt


def _train(model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int = 2) -> None:
    # Batches use old and new ids: the lookup touches both kinds of rows.
    ids = torch.randint(0, V0 + M, (2, 12), generator=torch.Generator().manual_seed(7))
    for _ in range(steps):
        opt.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()


@pytest.mark.parametrize(("tied", "bias"), [(True, False), (False, True)])
def test_frozen_old_rows_do_not_move_and_new_rows_train(tied: bool, bias: bool) -> None:
    model, opt = _migrated(tied=tied, bias=bias)
    old = torch.arange(V0)
    table = model.model.embed_tokens.weight
    new_before = table.detach()[V0:].clone()
    moments = opt.state[table]["exp_avg"][:V0].clone()
    freeze = freeze_rows(model, range(V0), optimizer=opt)
    _train(model, opt)
    freeze.check()
    assert torch.equal(opt.state[table]["exp_avg"][:V0], moments)  # moments resume unchanged
    assert not torch.equal(table.detach()[V0:], new_before)
    freeze.remove()
    digest = rows_digest(table, old)
    _train(model, opt, steps=1)
    with pytest.raises(CheckpointError):
        check_frozen(table, old, digest)


@pytest.mark.failure_lab("3.11")
def test_masking_only_the_lookup_gradient_does_not_freeze_tied_rows() -> None:
    """Only the sparse lookup gradient is masked to freeze old tied rows."""
    model, opt = _migrated(tied=True)
    table = model.model.embed_tokens.weight
    old = torch.arange(V0)
    digest = rows_digest(table, old)

    def block_old_lookups(
        module: torch.nn.Module, args: tuple[torch.Tensor], out: torch.Tensor
    ) -> torch.Tensor:
        is_old = (args[0] < V0).unsqueeze(-1)
        return torch.where(is_old, out.detach(), out)

    handle = model.model.embed_tokens.register_forward_hook(block_old_lookups)
    _train(model, opt)
    handle.remove()
    with pytest.raises(CheckpointError) as err:
        check_frozen(table, old, digest, name="embed_tokens")
    assert err.value.code == "FROZEN_ROW_MOVED"


def test_freeze_without_optimizer_still_blocks_the_gradient_under_plain_sgd() -> None:
    model, _ = _migrated(tied=True)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    freeze = freeze_rows(model, range(V0))
    _train(model, sgd)
    freeze.check()


def test_rows_outside_the_table_are_refused() -> None:
    model, _ = _migrated(tied=True)
    with pytest.raises(UsageError):
        freeze_rows(model, [V0 + M])
