"""The conventions every subcommand follows: -t, '-', closed pipes, --json, --quiet, exit codes."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, data_path, pud_file
from tokembed.cli import _build_parser, main

# Subcommands that print results (all of them) and those that read text or ids.
_PRINTS = (
    "train", "encode", "decode", "export", "tokenize", "demo", "measure", "inspect", "report", "estimate",
    "verify", "check", "memory", "ties", "checkpoint verify",
)  # fmt: skip
# The grammar: every listed command is a verb; earlier names stay as aliases of one.
_VERBS = (
    "train", "encode", "decode", "export", "tokenize", "demo", "measure", "inspect", "report", "estimate",
    "verify", "check", "audit", "migrate", "explain",
)  # fmt: skip
_ALIASES = {"memory": "estimate", "ties": "verify", "checkpoint verify": "verify", "lab": "explain"}


def _shell(command: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "TIKTOKEN_CACHE_DIR": str(cache),
        "T": f"{sys.executable} -m tokembed.cli",
    }
    return subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    """Every runnable subcommand, groups such as ``checkpoint verify`` by their full name."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not groups and prefix:
            found[prefix] = parser
        for group in groups:
            for name, child in group.choices.items():
                walk(child, f"{prefix} {name}".strip())

    walk(_build_parser(), "")
    return found


def test_every_subcommand_takes_quiet_and_json() -> None:
    subs = _subcommands()
    assert set(_PRINTS) <= set(subs)
    for name, p in subs.items():
        flags = {s for a in p._actions for s in a.option_strings}
        assert {"--quiet", "--json"} <= flags, name
        if "-t" in flags:  # one meaning of -t everywhere, with --encoding beside it
            assert "--encoding" in flags, name


def test_one_grammar_verbs_listed_and_earlier_names_kept_as_aliases() -> None:
    parser = _build_parser()
    (group,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    listed = [a.dest.split(" ")[0] for a in group._choices_actions]
    assert listed == list(_VERBS)
    subs = _subcommands()
    for old, new in _ALIASES.items():
        old_handler = subs[old].get_default("handler")
        assert old_handler is subs[new].get_default("handler"), old


def test_every_command_the_docs_show_still_parses() -> None:
    subs = _subcommands()
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    shown = set()
    for page in pages:
        fenced = False
        for line in page.read_text(encoding="utf-8").splitlines():
            fenced ^= line.startswith("```")
            words = line.removeprefix("$ ").split()
            if not fenced or len(words) < 2 or words[0] != "tokembed":
                continue
            if not words[1].startswith("-"):
                two = " ".join(words[1:3])
                shown.add(two if two in subs else words[1])
    assert sorted(shown - set(subs)) == []
    # Every command the README showed before the grammar was settled still runs.
    assert set(_ALIASES) <= set(subs)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == "tokembed 0.1.0\n"


def test_tokenizer_spec_means_the_same_everywhere(
    tiktoken_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ranks = str(data_path("tokenizers", "o200k_base.tiktoken"))
    text = "<|start|>user<|message|>Привет"
    for spec in (
        ["-t", "o200k_base@o200k_harmony"],  # a name, through tiktoken's cache
        ["-t", f"{ranks}@o200k_harmony"],
        ["-t", ranks, "--encoding", "o200k_harmony"],
        ["-t", "o200k_base", "--encoding", "o200k_harmony"],
    ):
        assert main(["encode", *spec, "--allow-special", text]) == 0, spec
        assert capsys.readouterr().out == "200006 1428 200008 23881 131903\n"
    assert main(["inspect", "-t", "o200k_base@o200k_harmony", "--json"]) == 0
    (sizes,) = json.loads(capsys.readouterr().out)
    assert (sizes["name"], sizes["id_range"]) == ("o200k_harmony", 201_088)
    assert main(["--quiet", "measure", "-t", "r50k_base", str(pud_file("en")), "--json"]) == 0
    (m,) = json.loads(capsys.readouterr().out)["measurements"]
    assert m["tokenizer"] == "r50k_base"


def test_pipes_round_trip_and_closed_pipe_is_quiet(tiktoken_cache: Path, tmp_path: Path) -> None:
    text = "Hello, мир! 12345\n"
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    proc = _shell(f"cd {tmp_path} && $T encode -t r50k_base - < in.txt | $T decode -t r50k_base -",
                  tiktoken_cache)  # fmt: skip
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, text, "")
    proc = _shell(f"cd {tmp_path} && $T encode --json -t r50k_base - < in.txt "
                  "| $T decode --json -t r50k_base", tiktoken_cache)  # fmt: skip
    assert json.loads(proc.stdout) == text
    (tmp_path / "big.txt").write_text("hello world " * 300_000)
    proc = _shell(f"$T encode -t r50k_base - < {tmp_path}/big.txt | head -c 12", tiktoken_cache)
    assert proc.stdout == "31373 995 23"
    assert proc.returncode == 141  # like any Unix filter whose reader went away
    assert proc.stderr == ""  # no BrokenPipeError traceback


def test_measure_reads_stdin(tiktoken_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proc = _shell("echo 'Hello world, this is stdin.' | $T measure -t r50k_base - --json",
                  tiktoken_cache)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    ((record,), (m,)) = data["corpora"], data["measurements"]
    import tiktoken

    tokens = len(tiktoken.get_encoding("r50k_base").encode("Hello world, this is stdin.\n"))
    assert (record["name"], record["bytes"], m["tokens"]) == ("stdin", 28, tokens)


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["encode", "-t", "o200k_bse", "x"], 2, "did you mean 'o200k_base'"),
        (["measure", "PUD", "--partition", "bogus"], 2, "unknown partition rule 'bogus'"),
        (["train", "PUD", "--merges", "5", "--pattern", "cl100k_bas", "-o", "t.json"], 2,
         "presets: cl100k, gpt2, gpt2-hf, o200k, r50k, teaching"),
        (["measure", "-t", "r50k_base", "PUD", "--plot", "c.svg"], 2, "no --curve was given"),
        (["measure", "-t", "r50k_base", "PUD", "--csv", "c.csv"], 2, "no --curve was given"),
        (["memory", "CONFIG", "--tp", "0"], 2, "INVALID_ARGUMENT"),
        (["encode", "-t", "r50k_base", "a<|endoftext|>"], 1,
         "pass --allow-special to encode '<|endoftext|>' as its id, or --specials-as-text"),
        (["decode", "-t", "cl100k_base", "9468", "239"], 1, "pass --errors replace"),
        (["encode", "-t", "CORPUS", "x"], 1, "is not a tokenizer file"),
        (["encode", "-t", "HFJSON", "--encoding", "r50k_base", "x"], 2,
         "drop --encoding r50k_base"),
        # Every failure is one coded line (issue 25.8): argparse's own mistakes too, ...
        (["encode", "--no-such-flag", "-t", "r50k_base", "x"], 2,
         "tokembed: INVALID_ARGUMENT: unrecognized arguments: --no-such-flag"),
        (["migrate", "CONFIG"], 2, "tokembed: INVALID_ARGUMENT: the following arguments are "
         "required: --old, --new, -o/--output"),
        (["migrate", "CONFIG", "--old", "x", "--new", "x", "-o", "o", "--bias-value", "1e308"],
         2, "tokembed: INVALID_ARGUMENT: argument --bias-value: '1e308' is not a finite number"),
        # ... a -t TOK@ENC that --encoding contradicts, ...
        (["encode", "-t", "RANKS@o200k_base", "--encoding", "cl100k_base", "x"], 2,
         "give the encoding once"),
        # ... pipes and devices as inputs, which exist, ...
        (["train", "/dev/null", "--merges", "5", "-o", "t.json"], 1, "EMPTY_CORPUS"),
        (["verify", "/dev/null"], 2, "tokembed: FILE_UNREADABLE: /dev/null is not a regular file"),
        # ... headers that no reader may trust, ...
        (["verify", "OVERLAP"], 1, "MALFORMED_CHECKPOINT: "),
        (["ties", "CORPUS"], 1, "MALFORMED_CHECKPOINT: "),
        # ... limits: ids are 32-bit (issue 25.7), ...
        (["train", "CORPUS", "--merges", "99999999999999999999", "-o", "t.json"], 2,
         "tokembed: INVALID_ARGUMENT: "),
        (["train", "CORPUS", "--merges", "5", "--special", "<|x|>=4294967296", "-o", "t.json"],
         2, "tokembed: INVALID_ARGUMENT: "),
        # ... and a plot format refused before the work.
        (["audit", "CONFIG", "-t", "r50k_base", "--plot", "p.bmp"], 2,
         "tokembed: INVALID_ARGUMENT: cannot write a plot as .bmp"),
        (["measure", "-t", "r50k_base", "PUD", "--curve", "10", "--plot", "c.bmp"], 2,
         "cannot write a plot as .bmp"),
    ],
)  # fmt: skip
def test_exit_codes_and_messages_speak_cli(
    tiktoken_cache: Path, tmp_path: Path, argv: list[str], code: int, says: str
) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("plain text, not a tokenizer\n")
    overlap = tmp_path / "overlap.safetensors"
    header = json.dumps(
        {
            "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
        }
    ).encode()
    overlap.write_bytes(len(header).to_bytes(8, "little") + header + bytes(12))  # fmt: skip
    swap = {
        "PUD": str(pud_file("en")),
        "CONFIG": str(data_path("tokenizers", "smollm2-135m")),
        "CORPUS": str(corpus),
        "HFJSON": str(data_path("tokenizers", "smollm2-135m", "tokenizer.json")),
        "OVERLAP": str(overlap),
        "RANKS@o200k_base": f"{data_path('tokenizers', 'o200k_base.tiktoken')}@o200k_base",
    }
    command = " ".join(f"'{swap.get(a, a)}'" for a in argv)
    proc = _shell(f"cd {tmp_path} && $T {command}", tiktoken_cache)
    assert proc.returncode == code, proc.stderr
    assert says in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert "allowed_special" not in proc.stderr
    assert "errors=" not in proc.stderr
    assert "rank file" not in proc.stderr.split(" — ")[0]  # the message, before the fix


# Root reads any file whatever its mode: the wrapper drops the two capabilities that let it
# (CAP_DAC_OVERRIDE = 1, CAP_DAC_READ_SEARCH = 2) from its bounding set and execs the CLI,
# which then runs as uid 0 bound by the mode bits like any user. (Switching to "nobody"
# would also lock the CLI out of the interpreter, installed under root's private home.)
_WITHOUT_DAC = r"""
import ctypes, os, sys
if os.geteuid() == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            sys.exit(f"prctl: {os.strerror(ctypes.get_errno())}")
os.execv(sys.executable, [sys.executable, "-m", "tokembed.cli", *sys.argv[1:]])
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "code", "exit_code"),
    [
        (["train", "LOCKED_FILE", "--merges", "5", "-o", "t.json"], "UNREADABLE_INPUT", 1),
        (["train", "LOCKED_DIR", "--merges", "5", "-o", "t.json"], "FILE_UNREADABLE", 2),
        (["measure", "-t", "r50k_base", "LOCKED_DIR"], "FILE_UNREADABLE", 2),
        (["encode", "-t", "LOCKED_FILE", "x"], "FILE_UNREADABLE", 2),
        (["checkpoint", "verify", "LOCKED_FILE"], "FILE_UNREADABLE", 2),
        (["verify", "LOCKED_CONFIG"], "FILE_UNREADABLE", 2),
        (["verify", "LOCKED_DIR"], "FILE_UNREADABLE", 2),
        (["check", "-t", "r50k_base", "LOCKED_FILE"], "FILE_UNREADABLE", 2),
        (["check", "-t", "r50k_base", "LOCKED_DIR"], "FILE_UNREADABLE", 2),
        (["audit", "LOCKED_FILE", "-t", "r50k_base"], "FILE_UNREADABLE", 2),
        (["migrate", "LOCKED_FILE", "--old", "r50k_base", "--new", "cl100k_base", "-o", "m"],
         "FILE_UNREADABLE", 2),
    ],
)  # fmt: skip
def test_an_unreadable_input_is_one_coded_line(
    tiktoken_cache: Path, tmp_path: Path, argv: list[str], code: str, exit_code: int
) -> None:
    """A file with mode 000 (and a folder with mode 000, and a model folder whose
    config.json has mode 000), read by a process the mode bits bind."""
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    locked_file = work / "locked.gguf"
    locked_file.write_text("hello world\n")
    locked_dir = work / "locked_dir"
    locked_dir.mkdir()
    (locked_dir / "a.txt").write_text("hello\n")
    model = work / "model"
    model.mkdir()
    (model / "config.json").write_bytes(
        data_path("tokenizers", "smollm2-135m", "config.json").read_bytes()
    )
    for path in (locked_file, locked_dir, model / "config.json"):
        path.chmod(0)
    swap = {"LOCKED_FILE": locked_file, "LOCKED_DIR": locked_dir, "LOCKED_CONFIG": model}
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "TIKTOKEN_CACHE_DIR": str(tiktoken_cache),
        "TOKEMBED_CACHE_DIR": str(tmp_path / "cache"),
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _WITHOUT_DAC, *(str(swap.get(a, a)) for a in argv)],
            capture_output=True,
            text=True,
            env=env,
            cwd=work,
            timeout=300,
            check=False,
        )
    finally:
        for path in (locked_file, locked_dir, model / "config.json"):
            path.chmod(0o755)
    assert "prctl:" not in proc.stderr, proc.stderr
    assert proc.returncode == exit_code, proc.stderr
    assert proc.stderr.startswith(f"tokembed: {code}: "), proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr


def test_train_learns_conllu_sentences_unless_raw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tokembed.measure.corpus import load_corpus
    from tokembed.tokenizer import TrainConfig, train
    from tokembed.tokenizer.formats import load_tokenizer

    pud = str(pud_file("en"))
    assert main(["--quiet", "train", pud, "--merges", "300", "-o", str(tmp_path / "s.json")]) == 0
    assert main(["train", pud, "--raw", "--merges", "300", "-o", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "111,421 bytes" in out  # the sentences' text, as `measure` reads the file
    sentences = load_tokenizer(tmp_path / "s.json")
    raw = load_tokenizer(tmp_path / "r.json")
    expected = train([load_corpus(pud).text], config=TrainConfig(merges=300, progress=False))
    assert sentences.address_hash == expected.address_hash
    assert not any(b"\t" in p for p in sentences.tables.pieces.values() if len(p) > 1)
    assert any(b"\t" in p for p in raw.tables.pieces.values() if len(p) > 1)  # CoNLL-U columns


def test_train_says_when_the_corpus_allows_fewer_merges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c.txt").write_text("aaaa bbbb aaaa")
    argv = ["train", str(tmp_path / "c.txt"), "--merges", "500", "-o", str(tmp_path / "t.json")]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    # aa, aaaa; then " aaaa"; bb, bbbb, " bbbb": 6 merges make every chunk one token
    assert json.loads(captured.out)["merges_learned"] == 6
    assert "allows only 6 merges" in captured.err
    assert "asked for 500" in captured.err


def test_regex_is_explicit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.txt").write_text("ab ab ab cd cd")
    out = tmp_path / "t.json"
    argv = ["train", str(tmp_path / "c.txt"), "--merges", "3", "-o", str(out)]
    assert main([*argv, "--regex", r"\S+|\s+", "--quiet"]) == 0
    assert json.loads(out.read_text())["pretokenizer"]["stages"] == [r"\S+|\s+"]


def test_demo_writes_only_what_it_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = [str(pud_file(lang)) for lang in ("en", "de", "fr")]
    base = ["--quiet", "demo", "--corpus", *corpus, "--merges", "20", "--holdout", "0.34"]
    assert main([*base, "-o", str(tmp_path / "a" / "tok.json"), "--no-report", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["report"] is None
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["tok.json"]
    report = tmp_path / "b" / "mine.html"
    assert main([*base, "-o", str(tmp_path / "b" / "tok.json"), "--report", str(report)]) == 0
    assert f"report: {report}" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["mine.html", "tok.json"]


def test_every_parse_mistake_of_every_subcommand_is_one_coded_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    subs = _subcommands()
    cases = [[], ["no-such-verb"], ["--no-such-flag"]]
    for name in subs:
        cases += [[*name.split(), "--no-such-flag"], [*name.split(), "--json=maybe"]]
    for argv in cases:
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2, (argv, err)
        assert err.startswith("tokembed: INVALID_ARGUMENT: "), (argv, err)
        assert err.count("\n") == 1, (argv, err)


def test_invalid_utf8_in_argv_is_named_by_its_byte(tiktoken_cache: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TIKTOKEN_CACHE_DIR": str(tiktoken_cache)}
    proc = subprocess.run(
        [sys.executable, "-m", "tokembed.cli", "encode", "-t", "r50k_base", b"h\xffllo"],
        capture_output=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.decode() == (
        "tokembed: INPUT_NOT_UTF8: command-line argument 4 is not UTF-8: byte 0xff at offset 1 — "
        "pass the text in UTF-8 (or in a file, with its path)\n"
    )
    assert b"surrogate" not in proc.stderr.lower()


def test_a_pipe_is_read_as_an_input(tiktoken_cache: Path, tmp_path: Path) -> None:
    proc = _shell(f"cd {tmp_path} && $T train <(printf 'hello hello hello') --merges 2 -o t.json",
                  tiktoken_cache)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "t.json").is_file()


def test_library_progress_bars_and_warnings_never_reach_a_non_terminal_stderr(
    tiktoken_cache: Path, tmp_path: Path
) -> None:
    from migrate._fixtures import base, llama
    from tokembed.tokenizer.formats import save_tokenizer

    save_tokenizer(base(), tmp_path / "old.json")
    llama(301, tied=True).save_pretrained(tmp_path / "model")
    proc = _shell(f"cd {tmp_path} && $T migrate --old old.json --new old.json model -o out",
                  tiktoken_cache)  # fmt: skip
    assert (proc.returncode, proc.stderr) == (0, "")  # no "Writing model shards" bar
    proc = _shell(f"cd {tmp_path} && $T migrate --old old.json --new old.json model -o out2 "
                  "--init constructor --bias prior --bias-value 1", tiktoken_cache)  # fmt: skip
    assert (proc.returncode, proc.stderr) == (0, "")
