"""`tokembed ties` and `tokembed checkpoint verify`: reports, JSON, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from _models import TinyLM, llama
from safetensors.torch import save_file

from tokembed.checkpoint import save_checkpoint
from tokembed.cli import main


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    llama(tied=True, seed=0).save_pretrained(root / "tied")
    lying = llama(tied=False, seed=1)
    lying.config.tie_word_embeddings = True  # the config claims a tie the weights lack
    state = {k: v.contiguous() for k, v in lying.state_dict().items()}
    (root / "lying").mkdir()
    save_file(state, str(root / "lying" / "model.safetensors"), metadata={"format": "pt"})
    lying.config.save_pretrained(root / "lying")
    denied = llama(tied=True, seed=2)
    denied.save_pretrained(root / "denied")  # stores embed_tokens only ...
    denied.config.tie_word_embeddings = False  # ... and then the config is edited to untie
    denied.config.save_pretrained(root / "denied")
    return root


def test_ties_on_a_tied_folder(folders: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ties", str(folders / "tied")]) == 0
    assert capsys.readouterr().out == (
        "model.embed_tokens.weight <-> lm_head.weight: stored_once, claimed tied "
        "(config.tie_word_embeddings): ok — stored once (model.embed_tokens.weight, one key)\n"
    )


def test_ties_json_and_exit_1_when_the_file_contradicts_the_config(
    folders: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ties", str(folders / "lying"), "--json"]) == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["ok"] is False
    assert report["pairs"][0]["code"] == "DIVERGENT_ALIAS_VALUES"
    assert captured.err.startswith("tokembed: DIVERGENT_ALIAS_VALUES: ")


def test_ties_flags_a_file_stored_once_under_an_untying_config(folders: Path) -> None:
    from tokembed.checkpoint.folder import folder_tie_report

    pair = folder_tie_report(folders / "denied").pairs[0]
    assert (pair.kind, pair.claimed, pair.code) == ("stored_once", False, "UNDECLARED_TIE")
    assert main(["ties", str(folders / "denied")]) == 1


def test_ties_without_a_config_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ties", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("tokembed: FILE_NOT_FOUND: ")


def test_checkpoint_verify_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = TinyLM(tied=True)
    adam = torch.optim.Adam(model.parameters())
    path = save_checkpoint(model, tmp_path / "c.safetensors", optimizer=adam, digests=True)
    assert main(["checkpoint", "verify", str(path)]) == 0
    assert capsys.readouterr().out == (
        f"{path}: ok — 4 tensors (67 parameter values), aliases: lm_head.weight -> "
        "embed.weight, optimizer: Adam, address hash: none, digests checked: 4\n"
    )
    assert main(["checkpoint", "verify", str(path), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["aliases"] == {"lm_head.weight": "embed.weight"}


def test_checkpoint_verify_refuses_a_damaged_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = save_checkpoint(TinyLM(), tmp_path / "c.safetensors")
    path.write_bytes(path.read_bytes()[:-1])
    assert main(["checkpoint", "verify", str(path)]) == 1
    assert capsys.readouterr().err.startswith("tokembed: MALFORMED_CHECKPOINT: ")
    with pytest.raises(SystemExit) as e:
        main(["checkpoint"])
    assert e.value.code == 2
