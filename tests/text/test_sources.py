"""The one text reader: files, folders, globs, gzip by content, stdin; exact error codes."""

from __future__ import annotations

import gzip
import hashlib
import io
import itertools
import sysconfig
from pathlib import Path

import pytest

from tokembed.errors import MeasureError, UsageError
from tokembed.text.sources import (
    FileRecord,
    SourceText,
    default_corpus,
    expand_paths,
    iter_text_blocks,
    read_source,
    read_texts,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.txt").write_text("zeta\n", encoding="utf-8")
    (tmp_path / "b" / "a.txt").write_text("alpha ü\n", encoding="utf-8")
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress("gamma 日本\n".encode()))
    (tmp_path / ".hidden").write_text("secret")
    return tmp_path


def test_folder_is_recursive_sorted_and_skips_hidden(tree: Path) -> None:
    names = [Path(n).relative_to(tree).as_posix() for n in expand_paths([str(tree)])]
    assert names == ["b/a.txt", "b/z.txt", "c.txt.gz"]


def test_gz_is_decompressed_and_globs_are_sorted(tree: Path) -> None:
    sources = read_texts([str(tree / "**" / "*.txt"), str(tree / "c.txt.gz")])
    assert [s.text for s in sources] == ["alpha ü\n", "zeta\n", "gamma 日本\n"]
    assert sources[2].n_bytes == len("gamma 日本\n".encode())


def test_gzip_is_recognised_by_content_not_by_name(tmp_path: Path) -> None:
    packed = gzip.compress("сжатый текст\n".encode())
    (tmp_path / "packed.txt").write_bytes(packed)  # gzip content, .txt name
    (tmp_path / "plain.gz").write_bytes(b"plain text\n")  # plain content, .gz name
    packed_src = read_source(tmp_path / "packed.txt")
    assert packed_src.text == "сжатый текст\n"
    # the record describes the bytes as stored, before decompression
    assert packed_src.record == FileRecord(
        path=str(tmp_path / "packed.txt"),
        sha256=hashlib.sha256(packed).hexdigest(),
        bytes=len(packed),
    )
    assert read_source(tmp_path / "plain.gz").text == "plain text\n"


def test_several_gzip_members_are_all_read(tmp_path: Path) -> None:
    (tmp_path / "two.gz").write_bytes(gzip.compress(b"one\n") + gzip.compress(b"two\n"))
    assert read_source(tmp_path / "two.gz").text == "one\ntwo\n"


def test_decompression_is_bounded(tmp_path: Path) -> None:
    bomb = gzip.compress(b"a" * 1_000_000)  # about 1 kB on disk
    (tmp_path / "bomb.gz").write_bytes(bomb)
    assert len(bomb) < 2_000
    with pytest.raises(MeasureError) as e:
        read_source(tmp_path / "bomb.gz", max_decompressed_bytes=999_999)
    assert e.value.code == "INPUT_TOO_LARGE"
    assert len(read_source(tmp_path / "bomb.gz", max_decompressed_bytes=1_000_000).text) == 10**6
    with pytest.raises(MeasureError) as e:
        read_texts([str(tmp_path)], max_decompressed_bytes=1000)
    assert e.value.code == "INPUT_TOO_LARGE"


def test_max_bytes_bounds_decompression_and_skips_a_bomb(tmp_path: Path) -> None:
    (tmp_path / "a-bomb.gz").write_bytes(gzip.compress(b"a" * 1_000_000))
    (tmp_path / "b.txt").write_text("small text\n")
    # Without max_bytes the bound is max_decompressed_bytes; with it, the room left.
    sources = read_texts([str(tmp_path)], max_bytes=1000, max_decompressed_bytes=10_000)
    assert [s.text for s in sources] == ["small text\n"]
    with pytest.raises(MeasureError) as e:
        read_texts([str(tmp_path)], max_decompressed_bytes=10_000)
    assert e.value.code == "INPUT_TOO_LARGE"


def test_stdin_dash() -> None:
    sources = read_texts(["-"], stdin=io.BytesIO("из stdin".encode()))
    assert [(s.name, s.text) for s in sources] == [("-", "из stdin")]
    packed = read_source("-", stdin=io.BytesIO(gzip.compress(b"zipped")))
    assert packed.text == "zipped"


def test_max_bytes_keeps_whole_files_in_order(tree: Path) -> None:
    sources = read_texts([str(tree)], max_bytes=len("alpha ü\n".encode()) + 5)
    assert [s.text for s in sources] == ["alpha ü\n", "zeta\n"]


def test_invalid_utf8_names_file_and_offset(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"caf\xe9 au lait")
    (tmp_path / "latin1.gz").write_bytes(gzip.compress(b"caf\xe9"))
    with pytest.raises(MeasureError) as e:
        read_texts([str(bad)])
    assert e.value.code == "INPUT_NOT_UTF8"
    assert str(bad) in str(e.value)
    assert "offset 3" in str(e.value)
    assert e.value.value == (str(bad), 3)
    with pytest.raises(MeasureError) as e:
        read_source(tmp_path / "latin1.gz")
    assert e.value.code == "INPUT_NOT_UTF8"


def test_missing_path_and_empty_glob_are_file_not_found(tmp_path: Path) -> None:
    for arg in [str(tmp_path / "nope.txt"), str(tmp_path / "*.none")]:
        with pytest.raises(UsageError) as e:
            read_texts([arg])
        assert e.value.code == "FILE_NOT_FOUND"
    with pytest.raises(UsageError) as e:
        read_source(tmp_path)  # a folder is not one file
    assert e.value.code == "FILE_NOT_FOUND"


def test_empty_input(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(MeasureError) as e:
        read_texts([str(tmp_path)])
    assert e.value.code == "EMPTY_INPUT"


def test_damaged_gz_is_unreadable(tmp_path: Path) -> None:
    bad = tmp_path / "x.txt"  # the name does not matter: the content starts like gzip
    bad.write_bytes(gzip.compress(b"hello world" * 100)[:30])
    with pytest.raises(MeasureError) as e:
        read_texts([str(bad)])
    assert e.value.code == "UNREADABLE_INPUT"


def test_default_corpus_is_the_stdlib_capped_and_deterministic() -> None:
    first = default_corpus(max_bytes=300_000)
    assert first == default_corpus(max_bytes=300_000)
    assert 250_000 < sum(s.n_bytes for s in first) <= 300_000
    root = Path(sysconfig.get_paths()["stdlib"])
    assert all(s.name.endswith(".py") and (root / s.name).is_file() for s in first)
    assert not any("site-packages" in s.name for s in first)
    one = first[0]
    assert one.record is not None
    assert one.record.sha256 == hashlib.sha256((root / one.name).read_bytes()).hexdigest()


def test_in_memory_text_has_no_record() -> None:
    assert SourceText(name="x", text="é").record is None
    assert SourceText(name="x", text="é").n_bytes == 2


def _texts(paths: list[str | Path], **kwargs: object) -> list[tuple[str, str]]:
    return [(Path(b.name).name, b.text) for b in iter_text_blocks(paths, **kwargs)]  # type: ignore[arg-type]


def test_blocks_join_to_each_file_and_cut_only_at_safe_line_starts(tmp_path: Path) -> None:
    lines = ["word ", "x\n", "  \n", "/path\n", "\n", "Next line\n", " indented\n", "end.\n"]
    text = "".join(lines) * 40
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(("ж" * 50 + "\nя").encode()))
    blocks = _texts([tmp_path], block_chars=30)
    assert "".join(t for n, t in blocks if n == "a.txt") == text
    assert [t for n, t in blocks if n == "b.txt.gz"] == ["ж" * 50 + "\n", "я"]
    for (name, block), (after, following) in itertools.pairwise(blocks):
        if name != after:
            continue
        # a cut follows "<non-space>\n" and precedes a non-space that is not "/"
        assert len(block) >= 30
        assert block.endswith("\n")
        assert not block[-2].isspace()
        assert not following[0].isspace()
        assert following[0] != "/"
    assert _texts([tmp_path], block_chars=None) == [("a.txt", text), ("b.txt.gz", "ж" * 50 + "\nя")]


def test_blocks_read_stdin_and_report_utf8_errors_at_the_file_offset(tmp_path: Path) -> None:
    data = gzip.compress(b"ok\nok\n" * 400_000 + b"\xff")
    stdin = io.BytesIO(data)
    with pytest.raises(MeasureError) as e:
        list(iter_text_blocks(["-"], stdin=stdin, block_chars=1000))
    assert e.value.code == "INPUT_NOT_UTF8"
    assert e.value.value == ("-", 2_400_000)
    with pytest.raises(MeasureError) as e2:
        list(iter_text_blocks(["-"], stdin=io.BytesIO(data), max_decompressed_bytes=1000))
    assert e2.value.code == "INPUT_TOO_LARGE"
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(MeasureError) as e3:
        list(iter_text_blocks([tmp_path / "empty.txt"]))
    assert e3.value.code == "EMPTY_INPUT"
    (tmp_path / "bad.gz").write_bytes(data[:50])
    with pytest.raises(MeasureError) as e4:
        list(iter_text_blocks([tmp_path / "bad.gz"]))
    assert e4.value.code == "UNREADABLE_INPUT"


def test_a_fifo_and_a_character_device_are_read_like_stdin(tmp_path: Path) -> None:
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write("héllo\n".encode())

    writer = threading.Thread(target=feed)
    writer.start()
    assert [t.text for t in read_texts([str(fifo)])] == ["héllo\n"]
    writer.join()
    with pytest.raises(MeasureError) as e:
        read_texts(["/dev/null"])
    assert e.value.code == "EMPTY_INPUT"  # there and empty, not FILE_NOT_FOUND
