"""Release manifest, version-pair admission, rollback tuple, derived packs, lifecycle."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from _fixtures import base, llama, make, populate_adam

from tokembed.artifacts.digest import tensor_digest
from tokembed.errors import CheckpointError
from tokembed.migrate import classify_change, migrate_model, row_map
from tokembed.migrate.release import (
    GATES,
    PackRecord,
    ReleaseManifest,
    admit_pair,
    build_manifest,
    check_packs,
    check_rollback,
    model_digest,
    model_tensors,
    next_stage,
    verify_tensors,
)

H, I, BANG = 104, 105, 33


def _release(
    *, kind: str = "append"
) -> tuple[ReleaseManifest, torch.nn.Module, dict[str, torch.Tensor]]:
    old_tok = base()
    if kind == "append":
        new_tok = make(
            [(H, I, 256), (BANG, BANG, 257), (256, BANG, 301)], {"<|end|>": 300, "<|im|>": 302}
        )
    else:
        new_tok = make([(H, I, 257), (BANG, BANG, 256)], {"<|end|>": 300, "<|im|>": 301})
    change = classify_change(old_tok, new_tok)
    rows = row_map(change)
    model = llama(rows.old_rows, tied=False, bias=True)
    opt = populate_adam(
        model, torch.randint(0, 301, (2, 8), generator=torch.Generator().manual_seed(0))
    )
    old_tensors = {k: v.clone() for k, v in model_tensors(model).items()}
    old_digest = model_digest(old_tensors)
    result = migrate_model(model, rows, optimizer=opt, old_hash=old_tok.address_hash)
    manifest = build_manifest(
        change=change, migration=result, model=model, old_model=old_digest, optimizer=opt
    )
    return manifest, model, old_tensors


def test_manifest_binds_tokenizers_tables_and_optimizer_state() -> None:
    manifest, model, old = _release()
    assert manifest.kind == "append-only"
    assert manifest.new.tokenizer != manifest.old.tokenizer
    assert set(manifest.tensors) == set(model_tensors(model))
    assert set(manifest.optimizer) == {
        f"{n}:{k}" for n in ("model.embed_tokens.weight", "lm_head.weight", "lm_head.bias")
        for k in ("exp_avg", "exp_avg_sq")
    }  # fmt: skip
    assert set(manifest.steps.values()) == {2.0}
    verify_tensors(manifest, model_tensors(model))
    with pytest.raises(CheckpointError) as err:
        verify_tensors(manifest, old)  # the pre-migration tensors are another model
    assert err.value.code == "MANIFEST_MISMATCH"
    back = ReleaseManifest.from_json(json.loads(json.dumps(manifest.to_json())))
    assert back == manifest


@pytest.mark.failure_lab("3.14")
def test_new_tokenizer_with_old_model_is_rejected_even_when_most_ids_fit() -> None:
    """T1/M0 is admitted because most IDs are still in range."""
    manifest, _, old = _release()
    # 301 of T1's 303 ids are rows of M0: the pair is still refused.
    assert old["model.embed_tokens.weight"].shape[0] == 301
    with pytest.raises(CheckpointError) as err:
        admit_pair(manifest, tokenizer=manifest.new.tokenizer, model=manifest.old.model)
    assert err.value.code == "VERSION_PAIR_REJECTED"


def test_version_pair_matrix() -> None:
    manifest, _, _ = _release()
    old, new = manifest.old, manifest.new
    assert admit_pair(manifest, tokenizer=old.tokenizer, model=old.model) == "control"
    assert admit_pair(manifest, tokenizer=old.tokenizer, model=new.model) == "compatibility"
    with pytest.raises(CheckpointError, match="has not passed the classifier gate"):
        admit_pair(manifest, tokenizer=new.tokenizer, model=new.model)
    passed = manifest.with_gates(**dict.fromkeys(GATES, True))
    assert admit_pair(passed, tokenizer=new.tokenizer, model=new.model) == "candidate"
    permuted, _, _ = _release(kind="permutation")
    with pytest.raises(CheckpointError, match="old ids moved"):
        admit_pair(permuted, tokenizer=permuted.old.tokenizer, model=permuted.new.model)


@pytest.mark.failure_lab("3.15")
def test_rollback_of_the_model_alone_is_refused() -> None:
    """Rollback restores M0 while retaining T1 IDs or candidate cache state."""
    manifest, _, _ = _release()
    old, new = manifest.old, manifest.new
    with pytest.raises(CheckpointError) as err:
        check_rollback(manifest, tokenizer=new.tokenizer, model=old.model)
    assert (err.value.code, "tokenizer" in err.value.message) == ("ROLLBACK_INCOMPLETE", True)
    with pytest.raises(CheckpointError) as err:
        check_rollback(
            manifest, tokenizer=old.tokenizer, model=old.model, ids_tokenizer=new.tokenizer
        )
    assert err.value.code == "ROLLBACK_INCOMPLETE"
    assert check_rollback(manifest, tokenizer=old.tokenizer, model=old.model) == old


def _pack(table: torch.Tensor, group: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Toy int8 pack: one absmax scale per group of rows (the deployment's derived artifact)."""
    rows = -(-table.shape[0] // group) * group
    padded = torch.cat([table, table.new_zeros(rows - table.shape[0], table.shape[1])])
    scales = padded.reshape(-1, group * table.shape[1]).abs().amax(dim=1) / 127
    q = torch.round(padded.reshape(len(scales), -1) / scales[:, None]).to(torch.int8)
    return q.reshape(rows, -1), scales


@pytest.mark.failure_lab("3.13")
def test_packed_bytes_appended_without_new_group_metadata_are_refused() -> None:
    """Quantized bytes are appended without regenerating group metadata."""
    manifest, model, old = _release()
    name = "lm_head.weight"
    old_q, old_scales = _pack(old[name])  # 301 rows -> 76 groups of 4 (3 padding rows)
    new_table = model_tensors(model)[name]
    # The shortcut: quantize the 2 new rows with the last group's scale and append the bytes.
    tail = torch.round(new_table[301:] / old_scales[-1]).to(torch.int8)
    appended = torch.cat([old_q[:301], tail])
    stale = PackRecord(
        name="lm_head.q8",
        source=name,
        source_sha256=tensor_digest(old[name]),
        rows=appended.shape[0],
    )
    with pytest.raises(CheckpointError) as err:
        check_packs(replace(manifest, packs=(stale,)), model_tensors(model))
    assert err.value.code == "STALE_PACK"
    fresh_q, _ = _pack(new_table)
    fresh = PackRecord(
        name="lm_head.q8", source=name, source_sha256=tensor_digest(new_table), rows=303
    )
    assert fresh_q.shape[0] == 304  # regenerated: 76 groups, one padding row
    check_packs(replace(manifest, packs=(fresh,)), model_tensors(model))


def test_lifecycle_advances_only_behind_its_gates() -> None:
    manifest, _, _ = _release()
    assert manifest.stage == "LOGICAL_STATE_CONVERTED"
    second = next_stage(manifest)
    assert second.stage == "SHARDS_AND_PACKS_MATERIALIZED"
    with pytest.raises(CheckpointError) as err:
        next_stage(second)
    assert (err.value.code, err.value.value) == ("GATE_NOT_PASSED", ["ownership", "artifact"])
    done = second.with_gates(**dict.fromkeys(GATES, True))
    while done.stage != "ACTIVE":
        done = next_stage(done)
    assert next_stage(done).stage == "ACTIVE"
