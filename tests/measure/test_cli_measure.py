"""`tokembed measure`, `inspect` and `report`: real output in-process, exit codes via subprocess."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _measure_data import loaded, ru_tokenizer, tokenizer_path

from conftest import pud_file
from tokembed.cli import main
from tokembed.tokenizer.formats import save_tokenizer


@pytest.fixture
def ru_json(tmp_path: Path) -> str:
    return str(save_tokenizer(ru_tokenizer(), tmp_path / "ru.json"))


def test_measure_lecture_partition_with_curve(
    ru_json: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = tmp_path / "curve.csv"
    argv = [
        "measure",
        "-t",
        ru_json,
        "-t",
        tokenizer_path("gpt2-hf"),
        str(pud_file("ru")),
        str(pud_file("en")),
    ]
    argv += [
        "--partition",
        "lecture",
        "--reference",
        "en",
        "--curve",
        "0,512,1024",
        "--csv",
        str(csv_path),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ru/eval" in out
    assert "33,654" in out
    assert "180,112" in out
    assert "18,168" in out
    lines = csv_path.read_text().splitlines()
    assert len(lines) == 1 + 4 * 3  # four labelled sides, three merge counts
    assert any(line.startswith("ru/train,1024,180112,") for line in lines)


def test_lecture_tour_without_a_tokenizer_saves_the_training_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["measure", str(pud_file("ru")), str(pud_file("en")), "--partition", "lecture"]
    assert main([*argv, "--save-texts", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "180,112" in out
    assert "bytes/tok" not in out  # no tokenizer, records only
    assert (tmp_path / "ru.train.txt").stat().st_size == 180_112
    assert (tmp_path / "en.eval.txt").stat().st_size == 18_168
    assert main([*argv, "--curve", "0,1"]) == 2  # a curve needs a tokenizer


def test_measure_json(ru_json: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["measure", "-t", ru_json, str(pud_file("ru")), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (record,) = data["corpora"]
    assert (record["bytes"], record["sentences"], record["documents"]) == (213_766, 1000, 397)
    assert record["files"][0]["path"].endswith("ru_pud-ud-test.conllu")
    (m,) = data["measurements"]
    assert m["corpus"] == "ru"
    assert m["bytes_per_token"] == m["bytes"] / m["tokens"]


def test_inspect_our_own_file(ru_json: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--json", ru_json]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    assert (d["mergeable_ids"], d["unique_ids"], d["id_range"], d["holes"]) == (1280, 1280, 1280, 0)


def test_inspect_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [
        tokenizer_path("smollm2-135m/tokenizer.json"),
        tokenizer_path("smollm2-135m/config.json"),
    ]
    assert main(["inspect", *paths]) == 0
    out = capsys.readouterr().out
    assert "49,152" in out
    assert main(["inspect", "--json", *paths]) == 0
    (d,) = json.loads(capsys.readouterr().out)
    assert (d["model_rows"], d["unreached_rows"]) == (49_152, 0)


def test_report_writes_one_html_file(
    ru_json: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r" / "report.html"
    argv = [
        "report",
        "-t",
        ru_json,
        str(pud_file("ru")),
        str(pud_file("en")),
        "--partition",
        "lecture",
    ]
    argv += [
        "--reference",
        "en",
        "--curve",
        "0,1024",
        "--inspect",
        tokenizer_path("smollm2-135m"),
        "-o",
        str(out),
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == str(out)
    page = out.read_text(encoding="utf-8")
    assert "<svg" in page
    assert "smollm2-135m" in page


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokembed.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_bad_input_exits_with_one_line_and_a_code(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    words = tmp_path / "words.txt"
    words.write_text("no digits at all\n")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"vocab_size": 100}))
    gpt2 = tokenizer_path("gpt2-hf")
    cases = [
        (["measure", "-t", gpt2, str(empty)], 1, "EMPTY_INPUT"),
        (["measure", "-t", gpt2, str(words), "--words", r"\d+"], 1, "EMPTY_WORD_DEFINITION"),
        (  # an unknown rule is a usage mistake (exit 2), naming the rules
            ["measure", "-t", gpt2, str(pud_file("ru")), "--partition", "random"],
            2,
            "unknown partition rule 'random'",
        ),
        (["inspect", gpt2, str(cfg)], 1, "VOCAB_BELOW_ID_RANGE"),
        (["measure", "-t", gpt2, str(words), "--curve", "x"], 2, "INVALID_ARGUMENT"),
    ]
    for argv, code, text in cases:
        proc = _cli(*argv)
        assert proc.returncode == code, (argv, proc.stderr)
        assert text in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr


def test_unaligned_parallel_files_exit_1(tmp_path: Path) -> None:
    block = "# sent_id = {}\n# text = x\n1\tx\n\n"
    (tmp_path / "a_x.conllu").write_text(block.format("s1"))
    (tmp_path / "b_x.conllu").write_text(block.format("s2"))
    proc = _cli(
        "measure",
        "-t",
        tokenizer_path("gpt2-hf"),
        str(tmp_path / "a_x.conllu"),
        str(tmp_path / "b_x.conllu"),
    )
    assert proc.returncode == 1
    assert "UNALIGNED_PARALLEL_CORPUS" in proc.stderr


def test_outputs_never_overwrite_inputs(ru_json: str, tmp_path: Path) -> None:
    """--save-texts, --csv and report -o refuse a path that is a corpus or tokenizer file."""
    corpus = tmp_path / "ru.txt"
    corpus.write_text("один два три\n", encoding="utf-8")
    before = corpus.read_bytes()
    tok_before = Path(ru_json).read_bytes()
    cases = [
        ["measure", str(corpus), "--save-texts", str(tmp_path)],  # would write ru.txt
        ["measure", "-t", ru_json, str(corpus), "--curve", "0,1", "--csv", str(corpus)],
        ["report", "-t", ru_json, str(corpus), "-o", ru_json],
    ]
    for argv in cases:
        proc = _cli(*argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert "OUTPUT_EXISTS" in proc.stderr
    assert corpus.read_bytes() == before
    assert Path(ru_json).read_bytes() == tok_before


def test_measure_reads_stdin_folders_and_gzip_named_anything(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("один два три\n", encoding="utf-8")
    (folder / "b.dat").write_bytes(gzip.compress("четыре пять\n".encode()))  # gzip, any name
    gpt2 = tokenizer_path("gpt2-hf")
    piped = subprocess.run(
        [sys.executable, "-m", "tokembed.cli", "measure", "-t", gpt2, "-", str(folder), "--json"],
        input="один два три\n".encode(),
        capture_output=True,
        timeout=120,
        check=True,
    )
    data = json.loads(piped.stdout)
    stdin, docs = data["measurements"]
    assert (stdin["corpus"], docs["corpus"]) == ("stdin", "docs")
    assert stdin["bytes"] == len("один два три\n".encode())
    assert docs["bytes"] == len("один два три\nчетыре пять\n".encode())
    files = data["corpora"][1]["files"]
    assert [Path(f["path"]).name for f in files] == ["a.txt", "b.dat"]
    # the folder's files are encoded one by one: its tokens are the two files' sums
    tok = loaded("gpt2-hf")
    each = tok.encode_ordinary("один два три\n") + tok.encode_ordinary("четыре пять\n")
    assert docs["tokens"] == len(each)
    assert stdin["tokens"] == len(tok.encode_ordinary("один два три\n"))


def test_latin1_corpus_is_input_not_utf8_for_every_command(tmp_path: Path) -> None:
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("café\n".encode("latin-1"))
    gpt2 = tokenizer_path("gpt2-hf")
    for argv in (
        ["measure", "-t", gpt2, str(latin)],
        ["train", str(latin), "--merges", "2", "-o", str(tmp_path / "t.json")],
        [
            "--quiet",
            "demo",
            "--corpus",
            str(latin),
            "--merges",
            "2",
            "-o",
            str(tmp_path / "d.json"),
        ],
    ):
        proc = _cli(*argv)
        assert proc.returncode == 1, (argv, proc.stderr)
        assert proc.stderr.startswith("tokembed: INPUT_NOT_UTF8: "), proc.stderr
        assert "offset 3" in proc.stderr


def test_partition_help_names_the_rules_not_an_alias(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["measure", "--help"])
    out = capsys.readouterr().out
    assert "sha256-mod<K>" in out
    assert "lecture" not in out


# --- progress: counted bytes per tokenizer, on a real terminal ------------------------------


def _on_a_terminal(argv: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run ``tokembed ARGV`` with stderr on a pseudo-terminal 120 columns wide."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # tqdm's width
    src = str(Path(__file__).resolve().parents[2] / "src")
    code = "import sys; from tokembed.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": src},
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.wait(timeout=300)
    os.close(master)
    return proc.returncode, out, b"".join(chunks).decode("utf-8", "replace")


def _utf8(path: Path) -> int:
    from tokembed.measure.corpus import load_corpus

    return sum(len(u.encode("utf-8")) for u in load_corpus(path).units)


def test_measure_and_report_count_the_bytes_each_tokenizer_encodes(tmp_path: Path) -> None:
    from tqdm import tqdm

    en, ru = pud_file("en"), pud_file("ru")
    r50k, gpt2 = tokenizer_path("r50k_base.tiktoken"), tokenizer_path("gpt2-hf")
    size = tqdm.format_sizeof
    corpus_bytes = _utf8(en) + _utf8(ru)
    argv = ["measure", "-t", r50k, "-t", gpt2, str(en), str(ru), "--curve", "0,1000,50000"]
    code, out, err = _on_a_terminal(argv, tmp_path)
    assert code == 0, err
    assert out.startswith("corpus ")
    both = size(2 * corpus_bytes, divisor=1000)  # two tokenizers, each on both corpora
    for step in ("r50k_base on en", "gpt2-hf on en", "r50k_base on ru", "gpt2-hf on ru"):
        assert f"{step}: " in err
    assert "gpt2-hf on ru: 100%" in err
    assert f"| {both}/{both} [" in err
    curve = size(corpus_bytes, divisor=1000)
    assert "curve of r50k_base on ru: 100%" in err
    assert f"| {curve}/{curve} [" in err
    assert "B/s]" in err  # a rate in bytes, not elapsed time alone
    # The report measures the same way; --quiet (or a pipe) draws nothing.
    page = tmp_path / "r.html"
    code, _, err = _on_a_terminal(["report", "-t", gpt2, str(en), "-o", str(page)], tmp_path)
    en_bytes = size(_utf8(en), divisor=1000)
    assert code == 0, err
    assert "gpt2-hf on en: 100%" in err
    assert f"| {en_bytes}/{en_bytes} [" in err
    code, _, err = _on_a_terminal(["--quiet", "measure", "-t", gpt2, str(en)], tmp_path)
    assert (code, err) == (0, "")
