"""Text sources: files, folders, globs, .gz, stdin; exact error codes; deterministic holdout."""

from __future__ import annotations

import gzip
import io
import sysconfig
from pathlib import Path

import pytest

from tokembed.errors import MeasureError, TokenizerError, UsageError
from tokembed.measure.sources import (
    SourceText,
    default_corpus,
    expand_paths,
    holdout_split,
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


def test_stdin_dash() -> None:
    sources = read_texts(["-"], stdin=io.BytesIO("из stdin".encode()))
    assert sources == [SourceText(name="-", text="из stdin")]


def test_max_bytes_keeps_whole_files_in_order(tree: Path) -> None:
    sources = read_texts([str(tree)], max_bytes=len("alpha ü\n".encode()) + 5)
    assert [s.text for s in sources] == ["alpha ü\n", "zeta\n"]


def test_invalid_utf8_names_file_and_offset(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"caf\xe9 au lait")
    with pytest.raises(TokenizerError) as e:
        read_texts([str(bad)])
    assert e.value.code == "INVALID_UTF8"
    assert str(bad) in str(e.value)
    assert "offset 3" in str(e.value)
    assert e.value.value == (str(bad), 3)


def test_missing_path_and_empty_glob_are_file_not_found(tmp_path: Path) -> None:
    for arg in [str(tmp_path / "nope.txt"), str(tmp_path / "*.none")]:
        with pytest.raises(UsageError) as e:
            read_texts([arg])
        assert e.value.code == "FILE_NOT_FOUND"


def test_empty_corpus(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(TokenizerError) as e:
        read_texts([str(tmp_path)])
    assert e.value.code == "EMPTY_CORPUS"


def test_damaged_gz_is_unreadable(tmp_path: Path) -> None:
    bad = tmp_path / "x.gz"
    bad.write_bytes(gzip.compress(b"hello world" * 100)[:30])
    with pytest.raises(MeasureError) as e:
        read_texts([str(bad)])
    assert e.value.code == "UNREADABLE_INPUT"


def test_holdout_is_whole_files_deterministic_and_order_free() -> None:
    sources = [SourceText(name=f"f{i}.txt", text=str(i)) for i in range(50)]
    train, held = holdout_split(sources, fraction=0.1)
    assert len(held) == 5
    assert len(train) == 45
    assert {s.name for s in train} | {s.name for s in held} == {s.name for s in sources}
    _train_r, held_r = holdout_split(sources[::-1], fraction=0.1)
    assert {s.name for s in held_r} == {s.name for s in held}
    assert holdout_split(sources[:1], fraction=0.5) == (sources[:1], [])
    assert len(holdout_split(sources[:2], fraction=0.01)[1]) == 1
    with pytest.raises(UsageError) as e:
        holdout_split(sources, fraction=1.0)
    assert e.value.code == "INVALID_ARGUMENT"


def test_default_corpus_is_the_stdlib_capped_and_deterministic() -> None:
    first = default_corpus(max_bytes=300_000)
    assert first == default_corpus(max_bytes=300_000)
    assert 250_000 < sum(s.n_bytes for s in first) <= 300_000
    root = Path(sysconfig.get_paths()["stdlib"])
    assert all(s.name.endswith(".py") and (root / s.name).is_file() for s in first)
    assert not any("site-packages" in s.name for s in first)
