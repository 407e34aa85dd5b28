"""`tokembed migrate`: a saved Llama moved to a tokenizer with added tokens; refusals exit 1 or 2."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

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


def _malformed_sources(root: Path, good: Path) -> dict[str, tuple[Path, str]]:
    """Thirteen malformed model sources and the code each is refused with."""
    config = json.loads((good / "config.json").read_text())
    weights = (good / "model.safetensors").read_bytes()
    cases: dict[str, tuple[Any, bytes | None, str]] = {
        "not JSON": ("{nope", weights, "INVALID_CONFIG"),
        "an array": ("[1, 2]", weights, "INVALID_CONFIG"),
        "vocab_size a string": ({**config, "vocab_size": "301"}, weights, "INVALID_CONFIG"),
        "vocab_size negative": ({**config, "vocab_size": -3}, weights, "INVALID_CONFIG"),
        "vocab_size missing": (
            {k: v for k, v in config.items() if k != "vocab_size"}, weights, "INVALID_CONFIG"
        ),
        "unknown model_type": ({**config, "model_type": "nosuch"}, weights, "INVALID_CONFIG"),
        "tie 'yes'": ({**config, "tie_word_embeddings": "yes"}, weights, "INVALID_CONFIG"),
        "no weights": (config, None, "FILE_NOT_FOUND"),
        "truncated weights": (config, weights[: len(weights) // 2], "MALFORMED_CHECKPOINT"),
        ".bin only": (config, b"", "INVALID_ARGUMENT"),
    }  # fmt: skip
    out: dict[str, tuple[Path, str]] = {}
    for k, (name, (cfg, data, code)) in enumerate(cases.items()):
        folder = root / f"m{k}"
        folder.mkdir()
        (folder / "config.json").write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
        if name == ".bin only":
            (folder / "pytorch_model.bin").write_bytes(b"not a pickle either")
        elif data is not None:
            (folder / "model.safetensors").write_bytes(data)
        out[name] = (folder, code)
    (root / "x.gguf").write_text("hello")
    (root / "notes.txt").write_text("hello")
    out["a non-GGUF .gguf"] = (root / "x.gguf", "MALFORMED_CHECKPOINT")
    out["a text file"] = (root / "notes.txt", "MALFORMED_CHECKPOINT")
    out["a FIFO"] = (root / "fifo", "FILE_UNREADABLE")
    os.mkfifo(root / "fifo")
    return out


def test_migrate_and_audit_refuse_thirteen_malformed_models_with_one_coded_line(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad").mkdir()
    sources = _malformed_sources(tmp_path / "bad", setup["model"])
    assert len(sources) == 13
    for name, (path, code) in sources.items():
        for argv in (
            ["migrate", "--old", str(setup["old"]), "--new", str(setup["new"]), str(path),
             "-o", str(tmp_path / "o"), "--quiet"],
            ["audit", "-t", str(setup["old"]), str(path), "--verify-top", "0", "--quiet"],
        ):  # fmt: skip
            capsys.readouterr()
            assert main(argv) in (1, 2), (name, argv[0])
            err = capsys.readouterr().err
            assert err.startswith(f"tokembed: {code}: "), (name, argv[0], err)
            assert err.count("\n") == 1, (name, err)
        assert not (tmp_path / "o").exists()


def test_the_output_is_refused_before_the_model_is_read(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The model's weights are truncated: had migrate read it first, the code would say so.
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_bytes((setup["model"] / "config.json").read_bytes())
    (broken / "model.safetensors").write_bytes(b"\0" * 16)
    (tmp_path / "exists").mkdir()
    base_argv = ["migrate", "--old", str(setup["old"]), "--new", str(setup["new"]), str(broken)]
    for out in (tmp_path / "exists", broken, setup["old"]):
        capsys.readouterr()
        assert main([*base_argv, "-o", str(out), "--quiet"]) == 2
        assert capsys.readouterr().err.startswith("tokembed: OUTPUT_EXISTS: ")


def test_a_removal_needs_accept_removal(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fewer = save_tokenizer(make([(H, I, 256)], {"<|end|>": 300}), tmp_path / "fewer.json")
    argv = ["migrate", "--old", str(setup["old"]), "--new", str(fewer), str(setup["model"])]
    capsys.readouterr()
    assert main([*argv, "-o", str(tmp_path / "o"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tokembed: NOT_APPEND_ONLY: the change from --old to --new is removal")
    assert "--accept-removal" in err
    assert not (tmp_path / "o").exists()
    assert main([*argv, "-o", str(tmp_path / "o"), "--quiet", "--accept-removal"]) == 0
    assert (tmp_path / "o" / "model.safetensors").is_file()


def test_fixes_name_the_flag_the_user_types_not_the_library_parameter(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = make([(H, I, 256), (BANG, BANG, 257)], {"<|end|>": 300}, preset="gpt2")
    new = save_tokenizer(other, tmp_path / "gpt2.json")  # same pieces, another pre-tokenizer
    argv = ["migrate", "--old", str(setup["old"]), "--new", str(new), str(setup["model"])]
    capsys.readouterr()
    assert main([*argv, "-o", str(tmp_path / "o"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tokembed: SEMANTICS_CHANGED: ")
    assert "pass --accept-overlap to reuse" in err
    assert "accept_overlap" not in err
