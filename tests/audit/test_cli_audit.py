"""`tokembed audit` end to end on a tiny saved model: text, --json, --plot, --report, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _tiny import BEYOND, HOLES, PLANTED, UNREACHABLE, anisotropic_head, llama, tokenizer

from conftest import REPO
from tokembed.cli import main
from tokembed.tokenizer.formats import save_tokenizer

_REFERENCE = (UNREACHABLE, *HOLES, *BEYOND)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A folder with a planted tiny Llama, its tokenizer file and a corpus file."""
    root = tmp_path_factory.mktemp("audit")
    model = llama(tied=True)
    anisotropic_head(model.get_output_embeddings().weight, (*_REFERENCE, *PLANTED), seed=1)
    model.save_pretrained(root / "model")
    tok = save_tokenizer(tokenizer(), root / "tiny.json")
    corpus = root / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over a lazy dog, abc bc ab\n", encoding="utf-8")
    return root / "model", Path(tok), corpus


def test_json_plot_and_report(
    saved: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, tok, corpus = saved
    plot, report = tmp_path / "ind.png", tmp_path / "audit.html"
    argv = ["audit", str(model), "-t", str(tok), "--corpus", str(corpus), "--verify-top", "8"]
    argv += ["--json", "--plot", str(plot), "--report", str(report), "--top", "400", "--quiet"]
    capsys.readouterr()  # drop what building the model printed (transformers' save bars)
    assert main(argv) == 0
    out = capsys.readouterr()
    data = json.loads(out.out)
    s = data["summary"]
    assert s["counts"]["unreachable"] == 1
    assert s["counts"]["hole"] == len(HOLES)
    assert s["reference_rows"] == len(_REFERENCE)
    assert s["verified"] == 8
    first = {r["id"] for r in data["rows"][: len(_REFERENCE) + len(PLANTED)]}
    assert first == {*_REFERENCE, *PLANTED}
    assert plot.read_bytes().startswith(b"\x89PNG")
    page = report.read_text(encoding="utf-8")
    assert "Under-trained tokens" in page
    assert "data:image/png;base64," in page
    assert f"wrote {plot}" in out.err
    assert f"wrote {report}" in out.err
    # The text table shows the same ranking.
    assert main(["audit", str(model), "-t", str(tok), "--reference", "259-299", "--top", "3",
                 "--verify-top", "0"]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "reference unused rows: 41 (given)" in text


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "tokembed.cli", *argv],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip


def test_errors_are_one_line_with_exit_codes(
    saved: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    model, tok, corpus = saved
    gpt2_like = tmp_path / "big.json"
    from tokembed.tokenizer import BPETables, Tokenizer

    wide = BPETables(pieces=tokenizer().tables.pieces, specials={"<|x|>": 400})
    save_tokenizer(Tokenizer(pretokenizer=tokenizer().pretokenizer, tables=wide), gpt2_like)
    cases = [
        (["audit", str(model), "-t", str(gpt2_like)], 1, "AUDIT_VOCAB_MISMATCH"),
        (["audit", str(model), "-t", str(tok), "--reference", "5,999"], 1,
         "AUDIT_REFERENCE_INVALID"),
        (["audit", str(model)], 2, "name the model's tokenizer with -t"),
        (["audit", str(tmp_path / "nope"), "-t", str(tok)], 2, "FILE_NOT_FOUND"),
        # A folder without config.json: refused by the one model validation, as check does.
        (["audit", str(tmp_path), "-t", str(tok)], 2, "FILE_NOT_FOUND: no such config"),
        (["audit", str(model), "-t", str(tok), "--confirm-below", "2"], 2, "probability in (0, 1]"),
        (["audit", str(model), "-t", str(tok), "--reference", "x"], 2, "ids and ranges"),
        (["audit", str(model), "-t", str(tok), "--plot", str(corpus), "--corpus", str(corpus)], 2,
         "OUTPUT_EXISTS"),
    ]  # fmt: skip
    for argv, code, says in cases:
        proc = _run(*argv, "--quiet")
        assert proc.returncode == code, (argv, proc.stderr)
        assert says in proc.stderr, (argv, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("tokembed: ")
