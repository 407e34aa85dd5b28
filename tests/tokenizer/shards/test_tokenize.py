"""Corpus to shards: exact ids per document, one output for every worker count, resume, bad input."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from _corpus import gpt2_path, write_corpus

from conftest import PUD_LANGS, pud_text
from tokembed.errors import FormatError, MeasureError, TokembedError, UsageError
from tokembed.text.jsonl import jsonl_texts
from tokembed.tokenizer import Tokenizer, load_tokenizer
from tokembed.tokenizer.shards import TokenizeConfig, read_manifest, tokenize_corpus
from tokembed.tokenizer.shards.plan import plan_shards
from tokembed.tokenizer.shards.shard_writer import ShardJob, runs_without_gil

_SMALL = 64 << 10  # shards of 64 KiB of input: the corpus makes several


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return load_tokenizer(gpt2_path())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


def _expected_documents(files: list[Path]) -> list[str]:
    docs: list[str] = []
    for path in files:
        if path.suffix == ".jsonl":
            docs += jsonl_texts([path.read_text(encoding="utf-8")], field="text", name=str(path))
            continue
        raw = path.read_bytes()
        text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode()
        docs += [line for line in text.split("\n") if line]
    return docs


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_megatron_shards_hold_each_documents_ids_then_eot(
    tmp_path: Path, gpt2: Tokenizer, corpus: list[Path]
) -> None:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    out = tmp_path / "out"
    m = tokenize_corpus(
        corpus, tokenizer=gpt2, output=out, config=TokenizeConfig(shard_bytes=_SMALL)
    )
    assert m.complete
    assert m.dtype == "uint16"  # 50,257 ids
    assert m.eot_id == gpt2.eot_token == 50256
    assert m.address_hash == gpt2.address_hash
    assert len(m.shards) > 4
    docs = _expected_documents(corpus)
    got: list[list[int]] = []
    for shard in m.shards:
        ds = IndexedDataset(str(out / shard.name))  # Megatron-Core's own reader
        assert len(ds) == shard.documents
        got += [ds[i].tolist() for i in range(len(ds))]
    assert len(got) == len(docs) == m.documents
    assert got == [[*gpt2.encode_ordinary(d), 50256] for d in docs]
    assert sum(map(len, got)) == m.tokens
    assert m.text_bytes == sum(len(d.encode()) for d in docs)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [i["sha256"] for i in manifest["inputs"]] == [
        __import__("hashlib").sha256(p.read_bytes()).hexdigest() for p in corpus
    ]
    assert manifest["eot"] is True
    assert manifest["shard_format"] == "megatron"


def test_flat_bin_reads_as_nanogpt_reads_it(
    tmp_path: Path, gpt2: Tokenizer, corpus: list[Path]
) -> None:
    out = tmp_path / "flat"
    cfg = TokenizeConfig(format="bin", shard_bytes=_SMALL, eot=False)
    m = tokenize_corpus(corpus[:1], tokenizer=gpt2, output=out, config=cfg)
    stream = np.concatenate(
        [np.memmap(out / f"{s.name}.bin", dtype=np.uint16, mode="r") for s in m.shards]
    )
    docs = _expected_documents(corpus[:1])
    assert stream.tolist() == [i for d in docs for i in gpt2.encode_ordinary(d)]
    side = json.loads((out / f"{m.shards[0].name}.json").read_text())
    assert side["address_hash"] == gpt2.address_hash
    assert side["eot_id"] is None
    ends = np.load(out / f"{m.shards[0].name}.ends.npy")
    assert len(ends) == m.shards[0].documents


def test_every_worker_count_and_engine_writes_the_same_bytes(
    tmp_path: Path, gpt2: Tokenizer, corpus: list[Path]
) -> None:
    outs = {}
    for name, cfg in {
        "one": TokenizeConfig(shard_bytes=_SMALL),
        "two": TokenizeConfig(shard_bytes=_SMALL, workers=2),
        "dask": TokenizeConfig(shard_bytes=_SMALL, engine="dask", workers=2),
    }.items():
        tokenize_corpus(corpus, tokenizer=gpt2, output=tmp_path / name, config=cfg)
        outs[name] = _files(tmp_path / name)
    assert outs["one"] == outs["two"] == outs["dask"]


def test_plain_text_lines_run_in_threads_and_write_what_one_worker_writes(
    tmp_path: Path, gpt2: Tokenizer, corpus: list[Path]
) -> None:
    """Line documents of plain text (and gzip) are encoded by the compiled encoder without
    the GIL, so workers are threads sharing its chunk cache; JSON Lines, another rule or
    errors="replace" read through Python and take processes. Either way the bytes are one
    worker's."""
    text = corpus[:2]  # pud.txt and its gzip
    cfg = TokenizeConfig(shard_bytes=_SMALL)

    def jobs(names: list[Path], config: TokenizeConfig) -> list[ShardJob]:
        paths = tuple(str(p) for p in names)
        return [
            ShardJob(
                entry=e,
                names=paths,
                folder=str(tmp_path),
                config=config,
                dtype="uint16",
                eot_id=None,
                address_hash=gpt2.address_hash,
            )
            for e in plan_shards(paths, config)
        ]

    assert gpt2.implementation == "compiled"
    assert all(runs_without_gil(j, gpt2) for j in jobs(text, cfg))
    assert not any(runs_without_gil(j, gpt2) for j in jobs(corpus[2:], cfg))  # JSON Lines
    for other in (replace(cfg, errors="replace"), replace(cfg, doc="blank-line")):
        assert not any(runs_without_gil(j, gpt2) for j in jobs(text, other))
    outs = {}
    for workers in (1, 2):
        config = replace(cfg, workers=workers)
        tokenize_corpus(text, tokenizer=gpt2, output=tmp_path / f"w{workers}", config=config)
        outs[workers] = _files(tmp_path / f"w{workers}")
    assert len(outs[1]) > 9
    assert outs[1] == outs[2]


@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])  # threads, processes
def test_a_failing_shard_among_workers_leaves_the_finished_ones_listed(
    tmp_path: Path, gpt2: Tokenizer, suffix: str
) -> None:
    """With two workers, a bad byte in one shard stops the run after the shards running
    beside it finish; each shard whose files exist is listed complete, and no other has a
    file under its name; --resume then encodes only the rest."""
    lines = "".join(pud_text(lang) for lang in PUD_LANGS).splitlines()[:4000]
    if suffix == ".jsonl":
        lines = [json.dumps({"text": line}, ensure_ascii=False) for line in lines]
    data = ("\n".join(lines) + "\n").encode()
    at = len(data) * 2 // 3
    while data[at] >= 0x80:
        at += 1
    bad = tmp_path / f"bad{suffix}"
    bad.write_bytes(data[:at] + b"\xff" + data[at:])
    cfg = TokenizeConfig(shard_bytes=_SMALL, workers=2)
    out = tmp_path / "out"
    with pytest.raises(MeasureError) as info:
        tokenize_corpus([bad], tokenizer=gpt2, output=out, config=cfg)
    assert info.value.code in ("INPUT_NOT_UTF8", "MALFORMED_JSONL")
    m = read_manifest(out)
    assert not m.complete
    done = {s.name for s in m.shards if s.complete}
    assert done  # the shards before the bad one finished
    on_disk = {p.name.split(".")[0] for p in out.iterdir() if p.name.startswith("shard-")}
    assert on_disk == done


def test_an_interrupted_run_resumes_without_reencoding_finished_shards(
    tmp_path: Path, corpus: list[Path]
) -> None:
    out = tmp_path / "out"
    script = (
        "import sys\n"
        "from tokembed.tokenizer import load_tokenizer\n"
        "from tokembed.tokenizer.shards import TokenizeConfig, tokenize_corpus\n"
        f"tok = load_tokenizer({str(gpt2_path())!r})\n"
        f"tokenize_corpus({[str(p) for p in corpus]!r}, tokenizer=tok, output={str(out)!r},"
        f" config=TokenizeConfig(shard_bytes={_SMALL}))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env=os.environ.copy())
    deadline = time.monotonic() + 120
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            done = sum(s.complete for s in read_manifest(out).shards)
        except TokembedError:
            done = 0
        if done >= 2:
            break
        time.sleep(0.005)
    proc.kill()  # SIGKILL: no cleanup runs
    proc.wait()
    partial = read_manifest(out)
    finished = [s for s in partial.shards if s.complete]
    if partial.complete:
        pytest.fail("the run finished before it could be interrupted; the corpus is too small")
    assert finished
    stamps = {s.name: os.stat(out / f"{s.name}.bin").st_mtime_ns for s in finished}
    gpt2 = load_tokenizer(gpt2_path())
    with pytest.raises(UsageError) as info:
        tokenize_corpus(
            corpus, tokenizer=gpt2, output=out, config=TokenizeConfig(shard_bytes=_SMALL)
        )
    assert info.value.code == "OUTPUT_EXISTS"
    with pytest.raises(UsageError) as info:
        tokenize_corpus(corpus, tokenizer=gpt2, output=out, config=TokenizeConfig(resume=True))
    assert info.value.code == "RESUME_MISMATCH"
    cfg = TokenizeConfig(shard_bytes=_SMALL, resume=True)
    m = tokenize_corpus(corpus, tokenizer=gpt2, output=out, config=cfg)
    assert m.complete
    assert {s.name: os.stat(out / f"{s.name}.bin").st_mtime_ns for s in finished} == stamps
    clean = tmp_path / "clean"
    tokenize_corpus(corpus, tokenizer=gpt2, output=clean, config=TokenizeConfig(shard_bytes=_SMALL))
    assert _files(out) == _files(clean)  # no document twice, none missing, no stale temp


def test_a_full_disk_leaves_no_partial_shard(tmp_path: Path, corpus: list[Path]) -> None:
    out = tmp_path / "out"
    limit = 40_000  # bytes any one file may have: the first shards fit, a later one does not
    script = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"  # a write past the limit: EFBIG
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "from tokembed.cli import main\n"
        f"sys.exit(main(['tokenize', *{[str(p) for p in corpus]!r}, '-t', {str(gpt2_path())!r},"
        f" '-o', {str(out)!r}, '--shard-bytes', '{_SMALL}']))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("tokembed: OUTPUT_WRITE_FAILED: "), run.stderr
    assert "Traceback" not in run.stderr
    m = read_manifest(out)
    assert not m.complete
    names = {p.name for p in out.iterdir()}
    for s in m.shards:
        if not s.complete:
            assert f"{s.name}.bin" not in names
    assert not [n for n in names if n.startswith(".tokembed-tmp-")]


def test_bad_bytes_are_refused_with_their_offset_or_replaced(
    tmp_path: Path, gpt2: Tokenizer
) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"first line\nsecond \xff line\n")
    with pytest.raises(MeasureError) as info:
        tokenize_corpus([bad], tokenizer=gpt2, output=tmp_path / "o1")
    assert info.value.code == "INPUT_NOT_UTF8"
    assert "byte 18" in info.value.message or "offset 18" in info.value.message, info.value.message
    m = tokenize_corpus(
        [bad], tokenizer=gpt2, output=tmp_path / "o2", config=TokenizeConfig(errors="replace")
    )
    assert m.documents == 2


def test_lines_from_bytes_equal_lines_from_decoded_text(tmp_path: Path, gpt2: Tokenizer) -> None:
    """Plain text under the line rule goes to the encoder as bytes (no str per line); the
    shards equal those of the decoding reader (taken with errors="replace"), across ranges,
    CR LF and CR-only lines, blank and space-only lines, a BOM, a line longer than a read and
    a last line without its line feed; a bad byte in a later range is named at its file offset."""
    lines = "".join(pud_text(lang) for lang in PUD_LANGS[:4]).splitlines()
    long_line = " ".join(lines[:20]) * 200  # ~2 MB: longer than the reader's 1 MiB reads
    text = "\ufeff" + "\r\n".join(lines[:300]) + "\n\n \n\r\n\r\n" + long_line + "\n"
    text += "\n".join(lines[300:]) + "\n\t\r\nend\r"
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(text.encode())
    outs = {}
    for errors in ("strict", "replace"):
        cfg = TokenizeConfig(shard_bytes=_SMALL, errors=errors)
        m = tokenize_corpus([corpus], tokenizer=gpt2, output=tmp_path / errors, config=cfg)
        outs[errors] = (_files(tmp_path / errors), m.documents, m.tokens, m.text_bytes)
    assert len(list((tmp_path / "strict").glob("*.bin"))) > 3
    strict, replace = outs["strict"][0], outs["replace"][0]
    assert strict.pop("manifest.json").replace(b'"strict"', b'"replace"') == replace.pop(
        "manifest.json"
    )  # the manifest records the policy
    assert strict == replace
    assert outs["strict"][1:] == outs["replace"][1:]
    docs = [d for line in text.split("\n") if (d := line.removesuffix("\r"))]
    assert outs["strict"][1:] == (
        len(docs),
        sum(len(gpt2.encode_ordinary(d)) + 1 for d in docs),
        sum(len(d.encode()) for d in docs),
    )
    data = text.encode()
    at = len(data) - 1000
    while data[at] >= 0x80:  # a character's first byte, so the one put before it is bad
        at += 1
    corpus.write_bytes(data[:at] + b"\xc3" + data[at:])  # a lead byte before ASCII
    cfg = TokenizeConfig(shard_bytes=_SMALL)
    with pytest.raises(MeasureError) as info:
        tokenize_corpus([corpus], tokenizer=gpt2, output=tmp_path / "bad", config=cfg)
    assert info.value.code == "INPUT_NOT_UTF8"
    assert f"offset {at}" in info.value.message or f"byte {at}" in info.value.message


def test_an_output_folder_with_other_files_is_refused(
    tmp_path: Path, gpt2: Tokenizer, corpus: list[Path]
) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    for cfg in (TokenizeConfig(), TokenizeConfig(overwrite=True), TokenizeConfig(resume=True)):
        with pytest.raises(UsageError) as info:
            tokenize_corpus(corpus[:1], tokenizer=gpt2, output=out, config=cfg)
        assert info.value.code == "OUTPUT_EXISTS"
    assert (out / "notes.txt").read_text() == "keep me"
    with pytest.raises(UsageError) as info:
        tokenize_corpus(corpus[:1], tokenizer=gpt2, output=corpus[0].parent)
    assert info.value.code == "OUTPUT_EXISTS"  # the inputs are inside it


def test_overwrite_replaces_only_shards(
    tmp_path: Path, gpt2: Tokenizer, corpus: list[Path]
) -> None:
    out = tmp_path / "out"
    tokenize_corpus(corpus, tokenizer=gpt2, output=out, config=TokenizeConfig(shard_bytes=_SMALL))
    m = tokenize_corpus(
        corpus[:1], tokenizer=gpt2, output=out, config=TokenizeConfig(overwrite=True)
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json",
        "shard-00000.bin",
        "shard-00000.idx",
    ]
    assert m.documents == 6000


def test_end_of_text_policy(tmp_path: Path, corpus: list[Path]) -> None:
    from tokembed.tokenizer import TrainConfig, train

    tok = train([corpus[0].read_text()[:20_000]], config=TrainConfig(merges=20))
    assert "<|endoftext|>" not in tok.special_tokens
    m = tokenize_corpus(corpus[:1], tokenizer=tok, output=tmp_path / "a")
    assert m.eot_id is None
    with pytest.raises(TokembedError) as info:
        tokenize_corpus(
            corpus[:1], tokenizer=tok, output=tmp_path / "b", config=TokenizeConfig(eot=True)
        )
    assert info.value.code == "UNKNOWN_SPECIAL_TOKEN"


def test_id_types_follow_the_id_range(tmp_path: Path, corpus: list[Path]) -> None:
    o200k = load_tokenizer(Path(gpt2_path()).parent / "o200k_base.tiktoken")
    m = tokenize_corpus(corpus[:1], tokenizer=o200k, output=tmp_path / "m")
    assert m.dtype == "int32"  # Megatron's index has no uint32
    m = tokenize_corpus(
        corpus[:1], tokenizer=o200k, output=tmp_path / "b", config=TokenizeConfig(format="bin")
    )
    assert m.dtype == "uint32"
    docs = _expected_documents(corpus[:1])
    ids = np.fromfile(tmp_path / "b" / "shard-00000.bin", dtype="<u4")
    assert ids.tolist() == [i for d in docs for i in [*o200k.encode_ordinary(d), o200k.eot_token]]


def test_standard_input_is_one_more_input(
    tmp_path: Path, gpt2: Tokenizer, corpus: list[Path]
) -> None:
    import io

    data = corpus[0].read_bytes()
    m = tokenize_corpus(["-"], tokenizer=gpt2, output=tmp_path / "s", stdin=io.BytesIO(data))
    assert m.inputs[0].path == "-"
    assert m.documents == 6000
    f = tokenize_corpus([corpus[0]], tokenizer=gpt2, output=tmp_path / "f")
    assert f.tokens == m.tokens
    assert (tmp_path / "s" / "shard-00000.bin").read_bytes() == (
        tmp_path / "f" / "shard-00000.bin"
    ).read_bytes()
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.startswith(".tokembed-tmp-")]


def test_a_megatron_document_too_long_for_its_index() -> None:
    from tokembed.tokenizer.shards import index_files

    with pytest.raises(FormatError) as info:
        index_files(
            "s",
            "megatron",
            dtype="uint16",
            lengths=np.array([1, 2**31]),
            address_hash="sha256:" + "0" * 64,
        )
    assert info.value.code == "DOCUMENT_TOO_LONG"
