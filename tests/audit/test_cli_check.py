"""`tokembed check`: a checklist (ok lines say what was verified, FAIL lines lead with the code),
exit 0 only when all pass, --json with both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import data_path
from tokembed.cli import main


def _smol() -> str:
    return str(
        data_path("tokenizers", "smollm2-135m")
    )  # tokenizer.json, its config and the model's


def test_smollm2_tokenizer_with_its_config_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "-t", _smol(), _smol()]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 14  # thirteen checks and the summary
    assert lines[1].split() == ["ok", "vocab", "rows", "|I|=49,152,", "R=49,152,", "V=49,152;",
                                "0", "holes", "below", "R,", "0", "rows", "no", "id",
                                "reaches"]  # fmt: skip
    assert lines[0].split()[:3] == ["skip", "address", "hash"]
    assert lines[0].endswith("the model records no tokenizer address hash; nothing to compare")
    # No ok or skip line names an error code: on a checklist a code reads as a failure.
    codes = {"ADDRESS_HASH_MISMATCH", "VOCAB_BELOW_ID_RANGE", "SHAPE_MISMATCH", "TIE_NOT_SHARED",
             "SPECIAL_ID_MISMATCH", "SCALE_MISMATCH", "UNSAFE_CAST", "NON_FINITE_VALUES"}  # fmt: skip
    assert not any(code in line for line in lines for code in codes)
    # A folder with a config and no weights: a partial result, never "all checks pass".
    assert lines[-1].endswith(": partial: every check that ran passes, but the folder stores "
                              "no weights, so no table was checked")  # fmt: skip
    assert out.err == ""


def test_gpt2_files_with_a_gpt2_folder_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2)).save_pretrained(tmp_path / "m")
    gpt2 = str(data_path("tokenizers", "gpt2-hf"))
    capsys.readouterr()  # what importing transformers printed is not the command's output
    assert main(["check", "-t", gpt2, str(tmp_path / "m"), "--json", "--headers-only"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["passed"], data["failed_codes"]) == (True, [])
    finite = next(c for c in data["checks"] if c["name"] == "table finite")
    assert (finite["status"], finite["code"]) == ("skip", "NON_FINITE_VALUES")


def test_o200k_with_smollm2_exits_1_with_one_line(
    tiktoken_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "-t", "o200k_base", _smol()]) == 1
    out = capsys.readouterr()
    assert out.err == (
        "tokembed: PAIR_NOT_ADMITTED: 5 checks fail (VOCAB_BELOW_ID_RANGE, SPECIAL_ID_MISMATCH)"
        " — pair the tokenizer (-t) with its own model\n"
    )
    lines = out.out.splitlines()
    failing = [line for line in lines if line.startswith("FAIL")]
    assert len(failing) == 5
    assert failing[0].split()[:4] == ["FAIL", "vocab", "rows", "VOCAB_BELOW_ID_RANGE:"]
    assert failing[0].endswith(
        "VOCAB_BELOW_ID_RANGE: |I|=200,000, R=200,019, V=49,152: ids 49152..200018 have no row"
    )
    assert all(line.split()[3] == "SPECIAL_ID_MISMATCH:" for line in failing[1:])
    scale = next(line for line in lines if line.split()[1:3] == ["input", "scale"])
    assert scale.split() == ["ok", "input", "scale", "declared", "x1,", "owner:", "none", "(no",
                             "module", "to", "observe)"]  # fmt: skip
    assert main(["check", "-t", "o200k_base", _smol(), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["failed_codes"] == ["VOCAB_BELOW_ID_RANGE"] + ["SPECIAL_ID_MISMATCH"] * 4
    # --json keeps the code and what was seen on every check, passing ones too.
    scale_json = next(c for c in data["checks"] if c["name"] == "input scale")
    assert (scale_json["status"], scale_json["code"], scale_json["detail"]) == (
        "ok",
        "SCALE_MISMATCH",
        "declared x1, owner: none (no module to observe)",
    )


def test_a_missing_model_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "-t", _smol(), str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tokembed: FILE_NOT_FOUND: no such model: ")
    assert err.count("\n") == 1
