"""Identities of a release: address, logical table, checkpoint and artifact stay separate kinds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tokembed.audit import (
    Identity,
    address_identity,
    artifact_identity,
    checkpoint_identity,
    require_identity,
    table_identity,
)
from tokembed.errors import AuditError, UsageError

HASH_A = "sha256:" + "a" * 64


def _table() -> torch.Tensor:
    return torch.arange(12, dtype=torch.float32).reshape(4, 3)


@pytest.mark.failure_lab("1.1")
def test_one_release_hash_is_not_every_kind_of_identity(tmp_path: Path) -> None:
    """One release hash used as every kind of identity.

    Resharding changes the artifacts, not the table; permuting rows changes the table, not
    its shape; neither kind may stand in for the other.
    """
    table = _table()
    whole, halves = tmp_path / "whole.safetensors", tmp_path / "half0.safetensors"
    save_file({"weight": table}, str(whole))
    save_file({"weight": table[:2].contiguous()}, str(halves))
    save_file({"weight": table[2:].contiguous()}, str(tmp_path / "half1.safetensors"))
    # Another serialization of the same logical tensor: artifacts differ, the table does not.
    assert artifact_identity(whole) != artifact_identity(halves)
    assert table_identity(table) == table_identity(torch.cat([table[:2], table[2:]]))
    permuted = table[[1, 0, 2, 3]]
    assert permuted.shape == table.shape
    assert table_identity(permuted) != table_identity(table)  # same shape, other semantics
    with pytest.raises(AuditError) as e:
        require_identity(artifact_identity(whole), "logical_table")
    assert (e.value.code, e.value.value) == (
        "IDENTITY_KIND_MISMATCH",
        ("artifact", "logical_table"),
    )
    with pytest.raises(AuditError) as e:  # a bare release hash: its kind was never recorded
        require_identity(table_identity(table).digest, "logical_table")
    assert e.value.code == "IDENTITY_KIND_MISMATCH"
    same_digest = Identity(kind="checkpoint", digest=table_identity(table).digest)
    with pytest.raises(AuditError) as e:  # equal digests of two kinds are not "equal"
        _ = same_digest == table_identity(table)
    assert e.value.code == "IDENTITY_KIND_MISMATCH"
    assert require_identity(table_identity(table), "logical_table") == table_identity(table)


def test_address_identity_is_the_tokenizers_hash() -> None:
    class _Tok:
        address_hash = HASH_A

    assert address_identity(_Tok()) == Identity(kind="address", digest=HASH_A)
    assert address_identity(HASH_A) == address_identity(_Tok())
    with pytest.raises(UsageError) as e:
        address_identity(object())
    assert e.value.code == "INVALID_ARGUMENT"


def test_checkpoint_identity_covers_tables_and_the_alias_graph() -> None:
    tables = {"embed.weight": _table(), "body.weight": torch.eye(3)}
    tied = checkpoint_identity(tables, aliases={"lm_head.weight": "embed.weight"})
    assert tied == checkpoint_identity(dict(reversed(tables.items())), aliases={
        "lm_head.weight": "embed.weight"
    })  # fmt: skip
    assert tied != checkpoint_identity(tables)  # same tables, no alias: another checkpoint
    changed = dict(tables, **{"body.weight": torch.eye(3) * 2})
    assert checkpoint_identity(changed, aliases={"lm_head.weight": "embed.weight"}) != tied


def test_table_identity_sees_dtype_and_layout_independent_values() -> None:
    table = _table()
    assert table_identity(table.t().contiguous().t()) == table_identity(table)  # storage order
    assert table_identity(table.double()) != table_identity(table)
    assert table_identity(table.t()) != table_identity(table)  # another logical tensor


def test_malformed_identities_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        Identity(kind="release", digest=HASH_A)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        Identity(kind="artifact", digest="md5:abc")
    with pytest.raises(UsageError) as e:
        artifact_identity(tmp_path / "absent.safetensors")
    assert e.value.code == "FILE_NOT_FOUND"
