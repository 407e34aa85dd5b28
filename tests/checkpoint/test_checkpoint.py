"""save_checkpoint/load_checkpoint: aliases restored and proven, refusals by code, HF interop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from _models import TinyLM, llama, lm_loss
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.torch import save_file

from tokembed.artifacts.safetensors_header import read_checkpoint_metadata
from tokembed.checkpoint import load_checkpoint, save_checkpoint
from tokembed.errors import CheckpointError, EmbeddingError, UsageError

HASH = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


def _assert_same_state(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def test_one_tensor_per_alias_group_and_the_alias_map_in_metadata(tmp_path: Path) -> None:
    path = save_checkpoint(TinyLM(tied=True), tmp_path / "c.safetensors", tokenizer=HASH)
    with safe_open(str(path), "pt") as f:
        assert sorted(f.keys()) == ["body.bias", "body.weight", "embed.weight", "position"]
        assert f.metadata()["format"] == "pt"
    meta = read_checkpoint_metadata(path)
    assert meta is not None
    assert meta["aliases"] == {"lm_head.weight": "embed.weight"}
    assert meta["address_hash"] == HASH
    assert meta["tensors"]["embed.weight"] == {"shape": [11, 4], "dtype": "float32"}
    assert meta["optimizer"] is None


def test_load_reties_an_independently_built_untied_model(tmp_path: Path) -> None:
    source = TinyLM(tied=True, seed=1)
    path = save_checkpoint(source, tmp_path / "c.safetensors")
    target = TinyLM(tied=False, seed=2)
    report = load_checkpoint(target, path, retie=True)
    assert report.retied == ("lm_head.weight",)
    assert target.lm_head.weight is target.embed.weight
    _assert_same_state(source, target)
    assert torch.equal(lm_loss(source), lm_loss(target))


def test_plain_load_state_dict_loses_the_alias_our_load_does_not(tmp_path: Path) -> None:
    source = TinyLM(tied=True, seed=1)
    plain = TinyLM(tied=False, seed=2)
    plain.load_state_dict(source.state_dict())  # values copied into two Parameters
    assert plain.lm_head.weight is not plain.embed.weight
    ours = TinyLM(tied=False, seed=2)
    load_checkpoint(ours, save_checkpoint(source, tmp_path / "c.safetensors"), retie=True)
    assert ours.lm_head.weight is ours.embed.weight


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16]),
    tied=st.booleans(),
)
def test_round_trip_is_bit_exact(
    tmp_path_factory, seed: int, dtype: torch.dtype, tied: bool
) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("rt") / "c.safetensors"
    source = TinyLM(tied=tied, seed=seed, dtype=dtype)
    save_checkpoint(source, path, digests=True)
    target = TinyLM(tied=False, seed=seed + 1, dtype=dtype)
    load_checkpoint(target, path, retie=True)
    _assert_same_state(source, target)
    assert (target.lm_head.weight is target.embed.weight) == tied


def test_divergent_values_under_two_alias_keys_are_refused(tmp_path: Path) -> None:
    untied = TinyLM(tied=False, seed=3)
    path = tmp_path / "two.safetensors"
    save_file({k: v.contiguous() for k, v in untied.state_dict().items()}, str(path))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(TinyLM(tied=True), path)
    assert e.value.code == "DIVERGENT_ALIAS_VALUES"
    assert e.value.value == ["embed.weight", "lm_head.weight"]
    # Equal values under both keys are one table stored twice: accepted.
    with torch.no_grad():
        untied.lm_head.weight.copy_(untied.embed.weight)
    save_file({k: v.contiguous() for k, v in untied.state_dict().items()}, str(path))
    target = TinyLM(tied=True)
    load_checkpoint(target, path)
    assert torch.equal(target.embed.weight, untied.embed.weight)


@pytest.mark.failure_lab("7.5")
def test_missing_keys_are_refused_or_reported_never_silently_fresh(tmp_path: Path) -> None:
    """Fresh initialization confused with checkpoint loading."""
    state = TinyLM(tied=True).state_dict()
    path = tmp_path / "partial.safetensors"
    save_file({k: v.contiguous() for k, v in state.items() if k not in ("embed.weight", "lm_head.weight", "body.bias")}, str(path))  # fmt: skip
    with pytest.raises(EmbeddingError) as e:
        load_checkpoint(TinyLM(tied=True), path)
    assert e.value.code == "MISSING_KEY"
    report = load_checkpoint(TinyLM(tied=True), path, strict=False)
    assert sorted(report.missing) == ["body.bias", "embed.weight", "lm_head.weight"]
    assert report.unexpected == ()
    assert report.states == {
        "embed.weight": "fresh", "body.weight": "exact_load", "body.bias": "fresh",
        "lm_head.weight": "fresh", "position": "exact_load",
    }  # fmt: skip


def test_unexpected_keys_are_refused_or_reported(tmp_path: Path) -> None:
    state = {k: v.contiguous() for k, v in TinyLM(tied=False).state_dict().items()}
    state["ghost.weight"] = torch.zeros(2)
    path = tmp_path / "extra.safetensors"
    save_file(state, str(path))
    with pytest.raises(EmbeddingError) as e:
        load_checkpoint(TinyLM(tied=False), path)
    assert e.value.code == "UNEXPECTED_KEY"
    assert load_checkpoint(TinyLM(tied=False), path, strict=False).unexpected == ("ghost.weight",)


def test_lossy_casts_are_refused_widening_is_admitted(tmp_path: Path) -> None:
    path = save_checkpoint(TinyLM(dtype=torch.float32), tmp_path / "f32.safetensors")
    with pytest.raises(EmbeddingError) as e:
        load_checkpoint(TinyLM(dtype=torch.bfloat16), path)
    assert e.value.code == "UNSAFE_CAST"
    source = TinyLM(dtype=torch.bfloat16, seed=4)
    path = save_checkpoint(source, tmp_path / "bf16.safetensors")
    wide = TinyLM(dtype=torch.float32, tied=False)
    load_checkpoint(wide, path, retie=True)
    assert torch.equal(wide.embed.weight, source.embed.weight.float())


def test_shape_mismatch_and_address_hash_mismatch(tmp_path: Path) -> None:
    path = save_checkpoint(TinyLM(), tmp_path / "c.safetensors", tokenizer=HASH)
    with pytest.raises(EmbeddingError) as e:
        load_checkpoint(TinyLM(), path, tokenizer=OTHER)
    assert e.value.code == "ADDRESS_HASH_MISMATCH"
    load_checkpoint(TinyLM(), path, tokenizer=HASH)
    model = TinyLM()
    model.body = torch.nn.Linear(4, 5)
    with pytest.raises(EmbeddingError) as e:
        load_checkpoint(model, path, strict=False)
    assert e.value.code == "SHAPE_MISMATCH"


def test_writes_are_atomic_and_never_overwrite_inputs(tmp_path: Path) -> None:
    path = save_checkpoint(TinyLM(seed=1), tmp_path / "c.safetensors")
    before = path.read_bytes()
    with pytest.raises(UsageError) as e:
        save_checkpoint(TinyLM(seed=2), path, inputs=[path])
    assert e.value.code == "OUTPUT_EXISTS"
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.safetensors"]  # no temp left


def test_two_parameters_on_one_storage_are_refused_at_save(tmp_path: Path) -> None:
    model = TinyLM(tied=False)
    model.lm_head.weight = torch.nn.Parameter(model.embed.weight.data)
    with pytest.raises(CheckpointError) as e:
        save_checkpoint(model, tmp_path / "c.safetensors")
    assert e.value.code == "UNDECLARED_TIE"


def test_hf_save_pretrained_file_loads_with_the_tie(tmp_path: Path) -> None:
    source = llama(tied=True, seed=5)
    source.save_pretrained(tmp_path / "hf")
    target = llama(tied=False, seed=6)
    target.config.tie_word_embeddings = True  # the claim the folder's config makes
    report = load_checkpoint(target, tmp_path / "hf" / "model.safetensors")
    assert report.retied == ("lm_head.weight",)
    assert target.lm_head.weight is target.model.embed_tokens.weight
    _assert_same_state(source, target)


def test_a_tied_checkpoint_is_not_forced_on_a_model_whose_config_unties(tmp_path: Path) -> None:
    path = save_checkpoint(llama(tied=True), tmp_path / "tied.safetensors")
    untied = llama(tied=False)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(untied, path)
    assert (e.value.code, e.value.value) == (
        "UNDECLARED_TIE",
        ("lm_head.weight", "model.embed_tokens.weight"),
    )
    assert untied.lm_head.weight is not untied.model.embed_tokens.weight  # nothing changed


def test_our_file_loads_in_transformers_from_pretrained_with_the_tie(tmp_path: Path) -> None:
    from transformers import LlamaForCausalLM

    source = llama(tied=True, seed=7)
    folder = tmp_path / "ours"
    save_checkpoint(source, folder / "model.safetensors")
    source.config.save_pretrained(folder)
    loaded = LlamaForCausalLM.from_pretrained(folder)
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    _assert_same_state(source, loaded)
    meta = json.loads(json.dumps(read_checkpoint_metadata(folder / "model.safetensors")))
    assert meta["aliases"] == {"lm_head.weight": "model.embed_tokens.weight"}


def test_the_tokenizer_in_use_must_be_the_one_saved(tmp_path: Path) -> None:
    from conftest import data_path
    from tokembed.tokenizer.formats import load_tokenizer

    smol = load_tokenizer(data_path("tokenizers", "smollm2-135m", "tokenizer.json"))
    gpt2 = load_tokenizer(data_path("tokenizers", "gpt2-hf"))
    path = save_checkpoint(TinyLM(), tmp_path / "c.safetensors", tokenizer=smol)
    assert read_checkpoint_metadata(path)["address_hash"] == smol.address_hash  # type: ignore[index]
    assert load_checkpoint(TinyLM(), path, tokenizer=smol).address_hash == smol.address_hash
    with pytest.raises(EmbeddingError) as e:
        load_checkpoint(TinyLM(), path, tokenizer=gpt2)
    assert (e.value.code, e.value.value) == ("ADDRESS_HASH_MISMATCH", smol.address_hash)


def test_a_plain_modules_two_parameters_are_tied_only_when_asked(tmp_path: Path) -> None:
    path = save_checkpoint(TinyLM(tied=True), tmp_path / "c.safetensors")
    target = TinyLM(tied=False, seed=1)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(target, path)
    assert e.value.code == "UNDECLARED_TIE"
    assert "retie=True" in (e.value.fix or "")
    assert target.lm_head.weight is not target.embed.weight  # nothing changed
    assert all(torch.equal(before[k], v) for k, v in target.state_dict().items())
    assert load_checkpoint(target, path, retie=True).retied == ("lm_head.weight",)
    # A model that already ties them needs no permission.
    assert load_checkpoint(TinyLM(tied=True), path).retied == ()


def test_a_refused_load_changes_nothing_checks_run_before_the_first_copy(tmp_path: Path) -> None:
    path = save_checkpoint(TinyLM(tied=True, seed=3), tmp_path / "c.safetensors")
    target = TinyLM(tied=False, seed=1)
    target.body = torch.nn.Linear(4, 5)  # a later layer of another shape
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(EmbeddingError) as e:
        load_checkpoint(target, path, retie=True)
    assert e.value.code == "SHAPE_MISMATCH"
    assert target.lm_head.weight is not target.embed.weight  # the alias was not re-pointed
    assert all(torch.equal(before[k], v) for k, v in target.state_dict().items())


def test_a_recorded_digest_the_bytes_do_not_match_is_refused_by_load(tmp_path: Path) -> None:
    path = save_checkpoint(TinyLM(tied=True), tmp_path / "c.safetensors", digests=True)
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0xFF  # one byte of the last tensor's data
    path.write_bytes(bytes(raw))
    target = TinyLM(tied=True, seed=1)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(target, path)
    assert e.value.code == "MALFORMED_CHECKPOINT"
    assert "SHA-256" in e.value.message
    assert all(torch.equal(before[k], v) for k, v in target.state_dict().items())
