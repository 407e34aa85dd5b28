"""Shard plans: every input byte in exactly one shard, cut only where documents end."""

from __future__ import annotations

from pathlib import Path

from _corpus import write_corpus

from tokembed.tokenizer.shards import TokenizeConfig, byte_ranges, hash_input, plan_shards


def test_plans_cover_each_file_once_and_cut_after_document_ends(tmp_path: Path) -> None:
    files = write_corpus(tmp_path)
    names = [str(p) for p in files]
    cfg = TokenizeConfig(shard_bytes=50_000)
    plan = plan_shards(names, cfg)
    assert plan == plan_shards(names, TokenizeConfig(shard_bytes=50_000, workers=7))
    assert [s.name for s in plan] == [f"shard-{i:05d}" for i in range(len(plan))]
    for index, path in enumerate(files):
        data = path.read_bytes()
        pieces = [
            (r.start, r.stop) for s in plan for r in byte_ranges(s, names) if r.index == index
        ]
        starts = [a for a, _ in pieces]
        stops = [len(data) if b is None else b for _, b in pieces]
        assert starts[0] == 0
        assert stops[-1] == len(data)
        assert starts[1:] == stops[:-1]  # no gap, no overlap
        if path.suffix == ".gz":
            assert pieces == [(0, None)]  # a gzip file is read whole
        for cut in starts[1:]:
            assert data[cut - 1 : cut] == b"\n"
    for s in plan:
        sizes = [(len(Path(names[i]).read_bytes()) if b is None else b) - a for i, a, b in s.ranges]
        assert sum(sizes) <= 50_000 or len(s.ranges) == 1


def test_blank_line_documents_are_cut_at_empty_lines(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("".join(f"para {i} line a\npara {i} line b\n\n" for i in range(5000)))
    plan = plan_shards([str(path)], TokenizeConfig(doc="blank-line", shard_bytes=10_000))
    data = path.read_bytes()
    cuts = [r.start for s in plan for r in byte_ranges(s, [str(path)]) if r.start]
    assert cuts
    assert all(data[c - 2 : c] == b"\n\n" for c in cuts)


def test_input_hash_is_sha256_of_the_stored_bytes(tmp_path: Path) -> None:
    import hashlib

    path = tmp_path / "x.txt"
    path.write_bytes(b"abc\n" * 1000)
    record = hash_input(str(path))
    assert record.sha256 == hashlib.sha256(b"abc\n" * 1000).hexdigest()
    assert record.bytes == 4000
