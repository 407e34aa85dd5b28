"""`tokembed memory`: text and JSON reports, exit codes for user mistakes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import data_path
from tokembed.cli import main


def _smollm2() -> str:
    return str(data_path("tokenizers", "smollm2-135m", "config.json"))


def test_text_report_on_smollm2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", _smollm2()]) == 0
    out = capsys.readouterr().out
    assert "V=49,152" in out
    assert "H=576" in out
    assert "(tied)" in out
    assert "28,311,552 params = 54.0 MiB in bf16" in out


def test_json_report_on_smollm2_with_tp(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", _smollm2(), "--tp", "4", "--dtype", "fp32", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["config"] == {
        "vocab_size": 49_152, "hidden_size": 576, "tied": True, "embedding_dim": None,
        "shared_bridge": False, "output_bias": False, "factorized": False,
    }  # fmt: skip
    assert report["parameters"]["total"] == 28_311_552
    assert report["weight_bytes"] == 4 * 28_311_552
    assert report["rows_per_rank"] == 12_288
    assert report["params_per_rank"] == 12_288 * 576
    assert report["training"]["master"] == 0  # fp32 weights are their own master


def test_llama_3_1_8b_config_built_with_transformers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import LlamaConfig

    LlamaConfig(vocab_size=128_256, hidden_size=4_096, tie_word_embeddings=False).to_json_file(
        tmp_path / "config.json"
    )
    assert main(["memory", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["parameters"]["total"] == 1_050_673_152
    assert report["weight_bytes"] == 2_101_346_304  # 1.957 GiB


def test_qwen2_5_72b_tp8_per_rank_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from transformers import Qwen2Config

    path = tmp_path / "qwen.json"
    Qwen2Config(vocab_size=152_064, hidden_size=8_192, tie_word_embeddings=False).to_json_file(path)
    assert main(["memory", str(path), "--tp", "8"]) == 0
    out = capsys.readouterr().out
    assert "input table         1,245,708,288 params" in out
    assert "per rank (tp=8): 19,008 rows; input 155,713,536 + output 155,713,536" in out


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokembed.cli", *args], capture_output=True, text=True, check=False
    )


def test_exit_codes_in_a_subprocess(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"vocab_size": 10, "hidden_size": 8}))
    for args, code, marker in [
        ((str(bad),), 1, "INVALID_CONFIG"),
        (("--tp", "two"), 2, "INVALID_ARGUMENT"),
    ]:
        proc = _cli("memory", *args)
        assert proc.returncode == code, (args, proc.stderr)
        assert marker in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "code", "marker"),
    [
        (("absent.json",), 2, "FILE_NOT_FOUND"),
        (("SMOL", "--dtype", "fp4"), 2, "INVALID_ARGUMENT"),
        (("SMOL", "--tp", "0"), 2, "INVALID_ARGUMENT"),
    ],
)
def test_user_mistakes_are_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    code: int,
    marker: str,
) -> None:
    argv = [
        _smollm2() if a == "SMOL" else str(tmp_path / a) if a.endswith(".json") else a for a in args
    ]
    assert main(["memory", *argv]) == code
    err = capsys.readouterr().err
    assert marker in err
    assert len(err.strip().splitlines()) == 1
