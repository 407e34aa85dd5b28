"""CLI train/encode/decode/export/demo: real output through main(), exit codes through a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import data_path, pud_file
from tokembed.cli import main


def _run(
    *args: str, stdin: bytes | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "tokembed.cli", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "tok.json"
    corpus = [str(pud_file(lang)) for lang in ("en", "ru")]
    assert (
        main(
            ["--quiet", "train", *corpus, "--merges", "200", "--special", "<|end|>", "-o", str(out)]
        )
        == 0
    )
    return out


def test_train_writes_a_loadable_tokenizer(trained: Path) -> None:
    doc = json.loads(trained.read_text())
    assert len(doc["merges"]) == 200
    assert doc["specials"] == {"<|end|>": 456}


def test_train_explicit_special_id_and_stdin(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    args = ["train", "-", "--merges", "3", "--special", "<|pad|>=5000", "-o", str(out), "--quiet"]
    result = _run(*args, stdin=b"aaaa bbbb aaaa")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().startswith("trained 3 merges on 1 file(s), 14 bytes")
    assert json.loads(out.read_text())["specials"] == {"<|pad|>": 5000}
    bad = _run("train", "-", "--merges", "3", "--special", "<|x|>=abc", "-o", str(out))
    assert bad.returncode == 2


def test_encode_then_decode_round_trip(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["encode", "-t", str(trained), "Hello, мир!"]) == 0
    ids = capsys.readouterr().out.split()
    assert main(["decode", "-t", str(trained), *ids]) == 0
    assert capsys.readouterr().out == "Hello, мир!\n"


def test_encode_special_policy(trained: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["encode", "-t", str(trained), "--allow-special", "a<|end|>"]) == 0
    assert capsys.readouterr().out.split() == ["97", "456"]
    assert main(["encode", "-t", str(trained), "a<|end|>"]) == 1
    assert "SPECIAL_TOKEN_DISALLOWED" in capsys.readouterr().err


def test_encode_real_rank_file_with_encoding(capsys: pytest.CaptureFixture[str]) -> None:
    rank_file = str(data_path("tokenizers", "r50k_base.tiktoken"))
    assert main(["encode", "-t", rank_file, "--encoding", "r50k_base", "Hello world"]) == 0
    assert capsys.readouterr().out == "15496 995\n"  # tiktoken r50k_base ids


def test_export_both_formats(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "-t", str(trained), "--format", "hf", "-o", str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "tokenizer.json").is_file()
    assert (
        main(["export", "-t", str(trained), "--format", "tiktoken", "-o", str(tmp_path / "tk")])
        == 0
    )
    capsys.readouterr()
    for folder in ("hf", "tk"):
        assert main(["encode", "-t", str(tmp_path / folder), "Hello, мир!"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == second


def test_demo_on_user_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = [str(pud_file(lang)) for lang in ("en", "de", "fr")]
    out = tmp_path / "demo.json"
    code = main(
        [
            "--quiet",
            "demo",
            "--corpus",
            *corpus,
            "--merges",
            "100",
            "--holdout",
            "0.34",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "3 files" in text
    assert "held-out: 1 files" in text
    assert str(out) in text
    assert out.is_file()


def test_demo_refuses_to_overwrite_a_corpus_file_named_by_a_glob(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text(f"hello world, text number {i}\n" * 50)
    argv = ["--quiet", "demo", "--corpus", str(tmp_path / "*.txt"), "--merges", "5"]
    assert main([*argv, "-o", str(tmp_path / "f0.txt")]) == 2
    assert "OUTPUT_EXISTS" in capsys.readouterr().err
    assert (tmp_path / "f0.txt").read_text().startswith("hello world, text number 0")


def test_demo_checks_every_output_before_saving_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    (tmp_path / "c.txt").write_text("hello world, some text\n" * 50)
    argv = ["--quiet", "demo", "--corpus", str(tmp_path / "c.txt"), "--merges", "5"]
    page = tmp_path / "out" / "report.html"
    page.parent.mkdir()
    page.write_text("<html>someone else's report</html>")
    out = tmp_path / "out" / "demo.json"
    assert main([*argv, "-o", str(out)]) == 2  # the default report path is not ours
    assert "OUTPUT_EXISTS" in capsys.readouterr().err
    assert not out.exists()
    assert page.read_text() == "<html>someone else's report</html>"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main([*argv, "-o", str(out), "--report", str(fifo)]) == 2
    assert "OUTPUT_NOT_A_FILE" in capsys.readouterr().err
    assert not out.exists()
    assert main([*argv, "-o", str(out), "--report", str(out)]) == 2
    assert not out.exists()
    ours = tmp_path / "ours"
    assert main([*argv, "-o", str(ours / "demo.json")]) == 0
    assert main([*argv, "-o", str(ours / "demo.json")]) == 0  # its own report is replaced
    assert sorted(p.name for p in ours.iterdir()) == ["demo.json", "report.html"]


def test_user_mistakes_exit_codes_one_line(tmp_path: Path, trained: Path) -> None:
    hf_dir = tmp_path / "hf"
    assert main(["export", "-t", str(trained), "--format", "hf", "-o", str(hf_dir)]) == 0
    bad_utf8 = tmp_path / "bad.txt"
    bad_utf8.write_bytes(b"ok \xff")
    cases = [
        (["encode", "-t", str(tmp_path / "missing.json"), "x"], 2, "FILE_NOT_FOUND"),
        (["decode", "-t", str(trained), "abc"], 2, "INVALID_ARGUMENT"),
        (
            ["train", str(bad_utf8), "--merges", "5", "-o", str(tmp_path / "o.json")],
            1,
            "INPUT_NOT_UTF8",
        ),
        (
            ["train", str(tmp_path / "nope"), "--merges", "5", "-o", str(tmp_path / "o.json")],
            2,
            "FILE_NOT_FOUND",
        ),
        (
            ["export", "-t", str(trained), "--format", "xml", "-o", str(tmp_path)],
            2,
            "INVALID_ARGUMENT",
        ),
        (["train", str(trained), "--merges", "5", "-o", str(trained)], 2, "OUTPUT_EXISTS"),
        (["decode", "-t", str(trained), "999999"], 1, "UNKNOWN_TOKEN_ID"),
        (["export", "-t", str(hf_dir), "--format", "hf", "-o", str(hf_dir)], 2, "OUTPUT_EXISTS"),
    ]
    for args, code, word in cases:
        result = _run(*args, cwd=tmp_path)
        err = result.stderr.decode()
        assert result.returncode == code, (args, err)
        assert word in err, (args, err)
        assert err.count("\n") == 1, (args, err)
        assert "Traceback" not in err


def test_decode_refuses_ids_python_cannot_read_as_ints(
    trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for ids in (
        ["²"],
        ["1" * 5000],
        ["[" + "1" * 5000 + "]"],
        ["[" * 100_000],
        ["[1.0]"],
        ["[true]"],
    ):
        assert main(["decode", "-t", str(trained), *ids]) == 2
        assert "INVALID_ARGUMENT" in capsys.readouterr().err


def test_encode_reads_stdin_in_subprocess(trained: Path) -> None:
    result = _run("encode", "-t", str(trained), "-", stdin=b"Hello")
    assert result.returncode == 0
    assert main(["decode", "-t", str(trained), *result.stdout.decode().split()]) == 0
