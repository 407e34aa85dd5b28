"""Counting chunks on a Dask LocalCluster of 2 worker processes equals the single-process count.

The cluster is real (spawned worker processes, TCP between them); every comparison is
with ``count_chunks`` or ``train`` in this process, chunk for chunk and merge for merge.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import PUD_LANGS, pud_text
from tokembed.cli import main
from tokembed.errors import MeasureError, TokenizerError, UsageError
from tokembed.text.ranges import TextFiles, split_ranges
from tokembed.tokenizer import Pretokenizer, TrainConfig, train
from tokembed.tokenizer._count import count_chunks
from tokembed.tokenizer._dask_count import _count, _count_range, count_with_client
from tokembed.tokenizer._seams import Partial, combine
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.learn import learn_merges

distributed = pytest.importorskip("distributed", reason="needs the dask extra")


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    # Worker processes are spawned: they import tokembed from PYTHONPATH, so point it here.
    src = str(Path(__file__).resolve().parents[2] / "src")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([src, *([old] if old else [])])
    try:
        with distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=":0",  # a free port: others may run clusters here
            silence_logs=logging.ERROR,
        ) as cluster:
            yield cluster.scheduler_address
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def client(address: str) -> Iterator[distributed.Client]:
    with distributed.Client(address) as c:
        yield c


@pytest.fixture(scope="module")
def pud_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("pud")
    paths = []
    for lang in PUD_LANGS:
        path = folder / f"{lang}.txt"
        path.write_text(pud_text(lang), encoding="utf-8")
        paths.append(str(path))
    return paths


def _local(texts: TextFiles | list[str], pattern: str) -> tuple[list[bytes], list[int]]:
    return _lists(
        count_chunks(list(texts), Pretokenizer.preset(pattern), workers=1, progress=False)
    )


def _lists(table: ChunkTable) -> tuple[list[bytes], list[int]]:
    return table.chunks(), table.counts.tolist()


@pytest.mark.parametrize("pattern", ["teaching", "o200k"])
def test_13_pud_files_equal_single_process(
    client: distributed.Client, pud_files: list[str], pattern: str
) -> None:
    files = TextFiles(tuple(pud_files))
    # 60 kB ranges: every file is cut 2 to 5 times, in all 13 scripts and languages.
    assert len(files.ranges(target_bytes=60_000)) == 41
    got, whole = _count(
        client, files, Pretokenizer.preset(pattern), range_bytes=60_000, merge=combine
    )
    assert whole == ()  # every seam joined: no file had to be read whole
    assert _lists(got) == _local(files, pattern)


def test_a_file_cut_in_many_ranges_equals_single_process(
    client: distributed.Client, pud_files: list[str]
) -> None:
    files = TextFiles((pud_files[PUD_LANGS.index("ru")], pud_files[PUD_LANGS.index("zh")]))
    ranges = files.ranges(target_bytes=20_000)
    assert len(ranges) == 17  # every cut is a seam the workers' scans must agree on
    pre = Pretokenizer.preset("cl100k")
    got, whole = _count(client, files, pre, range_bytes=20_000, merge=combine)
    assert whole == ()
    assert _lists(got) == _local(files, "cl100k")


def test_look_behind_pattern_and_two_stages_equal_single_process(
    client: distributed.Client, pud_files: list[str]
) -> None:
    files = TextFiles((pud_files[PUD_LANGS.index("de")],))
    behind = Pretokenizer.preset(r"\b\w+\b|\W+")  # \b looks behind: files are read whole
    got = count_with_client(client, files, behind, range_bytes=10_000)
    assert _lists(got) == _lists(count_chunks(list(files), behind, workers=1, progress=False))
    staged = Pretokenizer(stages=(r"\S+\s*|\s+", r"\p{L}+|\P{L}+"))
    got = count_with_client(client, files, staged, range_bytes=10_000)
    assert _lists(got) == _lists(count_chunks(list(files), staged, workers=1, progress=False))


def test_a_refused_seam_reads_that_file_whole(client: distributed.Client, tmp_path: Path) -> None:
    # A run of 40,000 spaces right after a cut is one chunk longer than the overlap the
    # left range scans, so the two scans cannot be shown to agree there.
    path = tmp_path / "spaces.txt"
    path.write_text("x\n" * 6000 + " " * 40_000 + "конец\n" + "ещё строка\n" * 500)
    files = TextFiles((str(path),))
    ranges = files.ranges(target_bytes=12_000)
    cut = next(i for i, r in enumerate(ranges) if r.start == 12_000)
    pre = Pretokenizer.preset("teaching")
    spec = (pre.stages, pre.dialect)
    left, right = _count_range(ranges[cut - 1], spec), _count_range(ranges[cut], spec)
    assert combine(left, right).refused == (0,)
    got, whole = _count(client, files, pre, range_bytes=12_000, merge=combine)
    assert whole == (0,)
    assert _lists(got) == _local(files, "teaching")


_ALPHABET = st.sampled_from(list("ab \n\n\n  \t'sdz19.,!?-ёжЖ日本🙂\r"))


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(_ALPHABET, min_size=1, max_size=600),
    target=st.integers(1, 80),
    pattern=st.sampled_from(["teaching", "cl100k", "o200k", "gpt2-hf"]),
)
def test_seams_join_exactly_in_any_order_of_combining(
    tmp_path: Path, text: str, target: int, pattern: str
) -> None:
    # In this process, without a cluster: ranges of a few bytes put a seam in every
    # kind of whitespace run, contraction and digit group; folding from the left and
    # combining as a balanced tree must give the single-process table.
    path = tmp_path / "h.txt"
    path.write_bytes(text.encode())
    pre = Pretokenizer.preset(pattern)
    parts = [
        _count_range(r, (pre.stages, pre.dialect))
        for r in split_ranges([path], target_bytes=target)
    ]
    want = _lists(count_chunks([text], pre, workers=1, progress=False))
    folded = functools.reduce(combine, parts)
    while len(parts) > 1:
        pairs = [combine(a, b) for a, b in zip(parts[::2], parts[1::2], strict=False)]
        parts = pairs + parts[len(pairs) * 2 :]
    assert parts[0].refused == folded.refused
    # A refused seam sends the file to be read whole (tested on the cluster below); a
    # seam that was accepted must be exact.
    event("refused" if folded.refused else "joined")
    if not folded.refused:
        assert _lists(folded.table) == want
        assert _lists(parts[0].table) == want


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.text(_ALPHABET, max_size=30).map(lambda t: t + "\n"), min_size=2, max_size=60
    ),
    target=st.integers(20, 120),
    pattern=st.sampled_from(["teaching", "cl100k", "o200k"]),
)
def test_seams_with_short_overlaps_are_exact_or_refused(
    tmp_path: Path, lines: list[str], target: int, pattern: str
) -> None:
    # An overlap of 24 bytes and a head of 6 characters (instead of 32 KiB and 4,096):
    # the scans past a cut end long before the text does, as on a real corpus.
    text = "".join(lines)
    path = tmp_path / "h.txt"
    path.write_bytes(text.encode())
    pre = Pretokenizer.preset(pattern)
    ranges = split_ranges([path], target_bytes=target)
    spec = (pre.stages, pre.dialect)
    parts = [_count_range(r, spec, overlap_bytes=24, head_chars=6) for r in ranges]
    folded = functools.reduce(combine, parts)
    event("refused" if folded.refused else "joined")
    if not folded.refused:
        assert _lists(folded.table) == _lists(count_chunks([text], pre, workers=1, progress=False))


def test_texts_in_memory_are_counted_in_batches(client: distributed.Client) -> None:
    texts = [pud_text(lang)[:30_000] for lang in ("ru", "ko", "th")]
    pre = Pretokenizer.preset("teaching")
    got, _ = _count(client, texts, pre, range_bytes=25_000, merge=combine)
    assert _lists(got) == _lists(count_chunks(texts, pre, workers=1, progress=False))


def test_train_merges_equal_local_on_a_pud_file(address: str, pud_files: list[str]) -> None:
    path = pud_files[PUD_LANGS.index("ru")]
    local = train(TextFiles((path,)), config=TrainConfig(merges=400, progress=False))
    dask = train(
        TextFiles((path,)),
        config=TrainConfig(merges=400, progress=False, engine="dask", scheduler=address),
    )
    assert local.n_merges == 400
    assert dask.tables.merges == local.tables.merges
    texts = [pud_text("fi"), pud_text("tr")]
    config = TrainConfig(merges=300, progress=False, engine="dask", scheduler=address)
    assert (
        train(texts, config=config).tables.merges
        == train(texts, config=TrainConfig(merges=300, progress=False)).tables.merges
    )


def _swapped(left: Partial, right: Partial) -> Partial:
    """A plausible bug: merging the right operand's table first (the seams still join)."""
    out = combine(left, right)
    table = ChunkTable.concat([right.table, left.table])
    return Partial(head=out.head, table=table, tail=out.tail, tail_file=out.tail_file)


def test_reduction_order_decides_ties(client: distributed.Client, tmp_path: Path) -> None:
    # Every word occurs equally often, so every pair count ties and the first merges are
    # decided by which chunk was met first: only a left-before-right reduction gets them.
    paths = []
    for i, words in enumerate(["ab ab cd cd", "ef ef gh gh", "ij ij kl kl"]):
        path = tmp_path / f"{i}.txt"
        path.write_text(words)
        paths.append(str(path))
    files, pre = TextFiles(tuple(paths)), Pretokenizer.preset("teaching")
    want = learn_merges(count_chunks(list(files), pre, workers=1, progress=False), merges=6)
    good, _ = _count(client, files, pre, range_bytes=1 << 20, merge=combine)
    bad, _ = _count(client, files, pre, range_bytes=1 << 20, merge=_swapped)
    assert learn_merges(good, merges=6) == want
    assert bad.to_dict() == good.to_dict()  # same counts ...
    assert learn_merges(bad, merges=6) != want  # ... other merges


def test_worker_errors_arrive_with_their_code(client: distributed.Client, tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\n" * 3000 + b"bad \xff byte\n")
    with pytest.raises(MeasureError) as e:
        count_with_client(
            client, TextFiles((str(path),)), Pretokenizer.preset("teaching"), range_bytes=8_000
        )
    assert e.value.code == "INPUT_NOT_UTF8"
    assert e.value.value == (str(path), 30_004)


def test_unreachable_scheduler() -> None:
    config = TrainConfig(merges=5, progress=False, engine="dask", scheduler="tcp://127.0.0.1:9")
    with pytest.raises(TokenizerError) as e:
        train(["some text"], config=config)
    assert e.value.code == "SCHEDULER_UNREACHABLE"
    assert e.value.value == "tcp://127.0.0.1:9"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"engine": "spark"},
        {"scheduler": "tcp://127.0.0.1:8786"},
        {"engine": "dask", "scheduler": ""},
    ],
)
def test_engine_and_scheduler_validation(kwargs: dict) -> None:
    with pytest.raises(UsageError) as e:
        TrainConfig(merges=3, **kwargs)
    assert e.value.code == "INVALID_ARGUMENT"


def test_cli_train_on_the_cluster_writes_the_local_tokenizer(
    address: str, pud_files: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = pud_files[PUD_LANGS.index("en")]
    argv = ["--quiet", "train", corpus, "--merges", "300", "--json"]
    assert main([*argv, "-o", str(tmp_path / "local.json")]) == 0
    capsys.readouterr()
    remote = [*argv, "--engine", "dask", "--scheduler", address, "-o", str(tmp_path / "d.json")]
    assert main(remote) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["merges_learned"] == 300
    assert (tmp_path / "d.json").read_bytes() == (tmp_path / "local.json").read_bytes()
    # No address: a local cluster of --workers processes is started and closed.
    argv = ["--quiet", "train", corpus, "--merges", "300", "--engine", "dask", "--workers", "1"]
    assert main([*argv, "-o", str(tmp_path / "own.json")]) == 0
    assert (tmp_path / "own.json").read_bytes() == (tmp_path / "local.json").read_bytes()


def test_cli_scheduler_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("some text\n")
    argv = ["train", str(corpus), "--merges", "3", "-o", str(tmp_path / "t.json")]
    assert main([*argv, "--scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tokembed: INVALID_ARGUMENT: --scheduler needs --engine dask")
    assert main([*argv, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tokembed: SCHEDULER_UNREACHABLE: ")
    assert "--scheduler" in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "t.json").exists()


# --- a local cluster that cannot start: code from stdin, a script without the guard --------

_TRAIN_ON_DASK = """
from tokembed.tokenizer import TrainConfig, train
texts = ["hello world " * 50, "the cat sat on the mat"]
{setup}
tok = train(texts, config=TrainConfig(merges=20, progress=False, engine="dask", {where}))
print(tok.address_hash)
"""


def _python(args: list[str], *, stdin: str | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    import sys

    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=180,
    )


def _last_line(stderr: str) -> str:
    return stderr.rstrip("\n").splitlines()[-1]


def test_dask_from_stdin_is_a_coded_error_that_says_how_to_run_it(tmp_path: Path) -> None:
    # `python -` names its main module '<stdin>', which Dask's spawned workers cannot
    # import: refused before any worker process starts, not with "Nanny failed to start".
    code = _TRAIN_ON_DASK.format(setup="", where="workers=1")
    proc = _python(["-"], stdin=code, cwd=tmp_path)
    assert proc.returncode == 1
    assert "Nanny failed to start" not in proc.stderr
    assert _last_line(proc.stderr) == (
        "tokembed.errors.TokenizerError: LOCAL_CLUSTER_NOT_STARTED: a local Dask cluster of 1"
        " worker process(es) cannot start: its worker processes start by importing the main"
        " module from '<stdin>', which is not a file (code read from stdin) — run it from a"
        ' script file whose calls sit under `if __name__ == "__main__":`, or, in a notebook or'
        " `python -`, start an in-process cluster yourself and pass its address:"
        " `cluster = distributed.LocalCluster(processes=False)`, then"
        ' `TrainConfig(engine="dask", scheduler=cluster.scheduler_address)`'
    )


def test_the_fix_from_stdin_trains_the_local_tokenizer(tmp_path: Path) -> None:
    # What the fix says, run from stdin: an in-process cluster, its address passed.
    setup = (
        "import distributed\n"
        "cluster = distributed.LocalCluster(processes=False, n_workers=1, dashboard_address=':0')"
    )
    code = _TRAIN_ON_DASK.format(setup=setup, where="scheduler=cluster.scheduler_address")
    proc = _python(["-"], stdin=code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    local = train(
        ["hello world " * 50, "the cat sat on the mat"],
        config=TrainConfig(merges=20, progress=False),
    )
    assert proc.stdout.split() == [local.address_hash]


def test_a_script_without_the_main_guard_is_the_same_coded_error(tmp_path: Path) -> None:
    # Each spawned worker imports the script, which starts a cluster again before the
    # worker is up: Dask's "Nanny failed to start", now the coded error with the fix.
    script = tmp_path / "unguarded.py"
    script.write_text(_TRAIN_ON_DASK.format(setup="", where="workers=1"), encoding="utf-8")
    proc = _python([str(script)], stdin=None, cwd=tmp_path)
    assert proc.returncode == 1
    last = _last_line(proc.stderr)
    assert last.startswith(
        "tokembed.errors.TokenizerError: LOCAL_CLUSTER_NOT_STARTED: a local Dask cluster of 1"
        " worker process(es) cannot start: RuntimeError: Nanny failed to start. — run it from"
        ' a script file whose calls sit under `if __name__ == "__main__":`'
    )
