"""`tokembed migrate`: a saved Llama moved to a tokenizer with added tokens; refusals exit 1 or 2."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from _fixtures import base, llama, make

from tokembed.cli import main
from tokembed.tokenizer.formats import save_tokenizer

H, I, BANG = 104, 105, 33


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    old = save_tokenizer(base(), tmp_path / "old.json")
    new_tok = make(
        [(H, I, 256), (BANG, BANG, 257), (256, BANG, 301)], {"<|end|>": 300, "<|im|>": 302}
    )
    new = save_tokenizer(new_tok, tmp_path / "new.json")
    model_dir = tmp_path / "model"
    llama(301, tied=True).save_pretrained(model_dir)
    return {"old": old, "new": new, "model": model_dir, "out": tmp_path / "out"}


def test_migrate_writes_model_manifest_and_report(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoModelForCausalLM

    before = _digest(setup["model"])
    argv = ["migrate", "--old", str(setup["old"]), "--new", str(setup["new"]), str(setup["model"])]
    capsys.readouterr()  # drop what building the model printed (transformers' save bars)
    assert main([*argv, "-o", str(setup["out"]), "--json", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["change"]["kind"] == "append-only"
    assert printed["migration"]["new_rows"] == 303
    assert _digest(setup["model"]) == before  # the source is untouched
    out = setup["out"]
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "manifest.json",
        "model.safetensors",
        "report.json",
        "tokenizer.tokembed.json",
    ]
    old = AutoModelForCausalLM.from_pretrained(setup["model"])
    new = AutoModelForCausalLM.from_pretrained(out)
    assert new.lm_head.weight is new.model.embed_tokens.weight
    assert torch.equal(new.model.embed_tokens.weight[:301], old.model.embed_tokens.weight)
    mean = old.model.embed_tokens.weight.detach().double().mean(0)
    gap = (new.model.embed_tokens.weight[301:].detach() - mean.float()).abs().max()
    assert float(gap) <= torch.finfo(torch.float32).eps * float(mean.abs().max())
    # The model file is a tokembed checkpoint: its metadata checks out and binds the rows
    # to the new tokenizer.
    from tokembed.checkpoint import verify_checkpoint
    from tokembed.tokenizer.formats import load_tokenizer

    verified = verify_checkpoint(out / "model.safetensors")
    assert verified.address_hash == load_tokenizer(setup["new"]).address_hash
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["aliases"] == {"lm_head.weight": "model.embed_tokens.weight"}
    # Migrating the migrated model again from the old tokenizer: its recorded hash refuses it.
    again = ["migrate", "--old", str(setup["old"]), "--new", str(setup["new"]), str(out)]
    capsys.readouterr()  # drop what building the model printed (transformers' save bars)
    assert main([*again, "-o", str(setup["out"].parent / "again"), "--quiet"]) == 1
    assert "ADDRESS_HASH_MISMATCH" in capsys.readouterr().err


def test_output_over_an_input_or_existing_folder_is_a_usage_error(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["migrate", "--old", str(setup["old"]), "--new", str(setup["new"]), str(setup["model"])]
    capsys.readouterr()  # drop what building the model printed (transformers' save bars)
    assert main([*argv, "-o", str(setup["model"]), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tokembed: OUTPUT_EXISTS")
    assert err.count("\n") == 1


def test_model_smaller_than_the_old_tokenizer_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = save_tokenizer(base(), tmp_path / "old.json")
    llama(200, tied=True).save_pretrained(tmp_path / "small")
    argv = [
        "migrate",
        "--old",
        str(old),
        "--new",
        str(old),
        str(tmp_path / "small"),
        "-o",
        str(tmp_path / "o"),
    ]
    capsys.readouterr()  # drop what building the model printed (transformers' save bars)
    assert main([*argv, "--quiet"]) == 1
    assert capsys.readouterr().err.startswith("tokembed: ROW_COUNT_MISMATCH")
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_migrate_smollm2_gguf_with_added_specials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from _smollm2 import ADDED, extended, gguf_file, tokenizer
    from transformers import AutoModelForCausalLM

    from conftest import data_path

    gguf = gguf_file()
    old = tokenizer()
    new = save_tokenizer(extended(old), tmp_path / "smollm2-chat.json")
    argv = [
        "migrate",
        "--old",
        str(data_path("tokenizers", "smollm2-135m")),
        "--new",
        str(new),
        str(gguf),
    ]
    assert (
        main([*argv, "-o", str(tmp_path / "out"), "--init", "decomposition", "--json", "--quiet"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["change"]["kind"] == "append-only"
    assert report["migration"]["new_rows"] == 49152 + len(ADDED)
    ledger = report["migration"]["init_ledger"]
    assert [r["initializer"] for r in ledger] == ["decomposition"] * len(ADDED)
    assert all(
        len(r["sources"]) > 1 for r in ledger
    )  # each special's spelling is several old pieces
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert model.model.embed_tokens.weight.shape == (49152 + len(ADDED), 576)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308"])
def test_a_non_finite_bias_value_is_a_coded_usage_error_before_any_work(
    setup: dict[str, Path], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["migrate", "--old", str(setup["old"]), "--new", str(setup["new"]), str(setup["model"])]
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main([*argv, "-o", str(setup["out"]), "--bias", "prior", f"--bias-value={value}"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("tokembed: INVALID_ARGUMENT: argument --bias-value: ")
    assert err.count("\n") == 1
    assert not setup["out"].exists()
