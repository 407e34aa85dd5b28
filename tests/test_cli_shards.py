"""`tokembed tokenize`: one summary line on success, one coded line and no traceback on a mistake."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import data_path
from tokembed.cli import main


def _corpus(tmp_path: Path) -> Path:
    from conftest import pud_text

    path = tmp_path / "ru.txt"
    path.write_text(pud_text("ru"), encoding="utf-8")
    return path


def test_tokenize_writes_shards_and_prints_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _corpus(tmp_path)
    gpt2 = str(data_path("tokenizers", "gpt2-hf"))
    assert (
        main(
            [
                "tokenize",
                str(corpus),
                "-t",
                gpt2,
                "-o",
                str(tmp_path / "o"),
                "--format",
                "bin",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["documents"] == 1000
    assert summary["dtype"] == "uint16"
    assert summary["format"] == "bin"
    assert (tmp_path / "o" / "shard-00000.bin").stat().st_size == 2 * summary["tokens"]


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--doc", "pages"], "INVALID_ARGUMENT"),
        (["--workers", "0"], "INVALID_ARGUMENT"),
        (["--scheduler", "tcp://h:1"], "INVALID_ARGUMENT"),
        (["--resume", "--overwrite"], "INVALID_ARGUMENT"),
        (["--eot"], "UNKNOWN_SPECIAL_TOKEN"),
    ],
)
def test_mistakes_are_one_coded_line(tmp_path: Path, args: list[str], code: str) -> None:
    corpus = _corpus(tmp_path)
    tok = tmp_path / "tok.json"
    assert main(["train", str(corpus), "--merges", "10", "-o", str(tok)]) == 0
    run = subprocess.run(
        [sys.executable, "-m", "tokembed.cli", "tokenize", str(corpus), "-t", str(tok), "-o", str(tmp_path / "o"), *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode in (1, 2)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"tokembed: {code}") or f": {code}" in lines[0], lines[0]
