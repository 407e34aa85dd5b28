"""Byte ranges: cuts after line feeds, reading back to the whole file's text, the same errors."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokembed.errors import MeasureError, UsageError
from tokembed.text.ranges import ByteRange, TextFiles, read_range, split_ranges
from tokembed.text.sources import read_source


def test_split_ranges_cut_after_line_feeds(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    line = "строка номер один\n".encode()  # 33 bytes
    path.write_bytes(line * 1000)
    ranges = split_ranges([path], target_bytes=1000)
    assert [r.start for r in ranges][:3] == [1023 - 1023, 1023, 1023 + 1023]  # 31 lines each
    assert all(r.start % len(line) == 0 for r in ranges)
    assert ranges[-1].stop is None
    assert [r.stop for r in ranges[:-1]] == [r.start for r in ranges[1:]]
    assert split_ranges([path], target_bytes=10**9) == [
        ByteRange(path=str(path), index=0, start=0, stop=None)
    ]


def test_ranges_read_back_to_the_file_text_and_overlaps_end_on_characters(tmp_path: Path) -> None:
    text = "".join(f"{i} строка 日本語 🙂\n" for i in range(700))
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    ranges = split_ranges([path, path], target_bytes=777)
    assert [r.index for r in ranges].count(1) == [r.index for r in ranges].count(0) > 20
    parts = [read_range(r, overlap_bytes=50) for r in ranges]
    assert "".join(t for t, _ in parts) == text + text
    for (r, (_, extra)), (_, (following, _)) in itertools.pairwise(zip(ranges, parts, strict=True)):
        if r.last:
            assert extra == ""  # nothing past a file's end
            continue
        assert following.startswith(extra)  # the overlap is the next range's start
        assert 47 <= len(extra.encode()) <= 50  # a character cut by the limit is left out
    assert parts[-1][1] == ""  # a file's last range has no overlap
    assert "".join(TextFiles((str(path), str(path)))) == text + text


def test_a_gzip_file_or_a_short_file_is_one_whole_range(tmp_path: Path) -> None:
    gz = tmp_path / "t.txt"
    gz.write_bytes(gzip.compress(b"line\n" * 10_000))
    (r,) = split_ranges([gz], target_bytes=100)
    assert r == ByteRange(path=str(gz), index=0, start=0, stop=None)
    assert r.first
    assert r.last
    assert read_range(r, overlap_bytes=100) == ("line\n" * 10_000, "")
    no_newline = tmp_path / "one-line.txt"
    no_newline.write_text("x" * 5000)
    assert len(split_ranges([no_newline], target_bytes=100)) == 1


def test_range_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\n" * 400 + b"\xc3(\n")
    last = split_ranges([path], target_bytes=500)[-1]
    with pytest.raises(MeasureError) as e:
        read_range(last)
    assert e.value.code == "INPUT_NOT_UTF8"
    assert e.value.value == (str(path), 1200)  # counted from the file's start
    for bad, code in [("-", "INVALID_ARGUMENT"), (str(tmp_path / "none"), "FILE_NOT_FOUND")]:
        with pytest.raises(UsageError) as u:
            split_ranges([bad], target_bytes=10)
        assert u.value.code == code
    with pytest.raises(UsageError) as u:
        split_ranges([path], target_bytes=0)
    assert u.value.code == "INVALID_ARGUMENT"


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.lists(
        st.sampled_from(
            [b"\n", b"a", b" ", b"\xc3\xa9", b"\xe6\x97\xa5", b"\xf0\x9f\x99\x82", b"\xc3", b"\xff"]
        ),
        max_size=300,
    ).map(b"".join),
    target=st.integers(1, 40),
)
def test_ranges_read_what_the_whole_file_reader_reads(
    tmp_path: Path, data: bytes, target: int
) -> None:
    # Any bytes: the ranges' texts join to the file's text, or both readers refuse the
    # same first bad byte with the same offset.
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    try:
        whole: str | tuple[str, object] = read_source(path).text
    except MeasureError as exc:
        whole = (exc.code, exc.value)
    try:
        got: str | tuple[str, object] = "".join(
            read_range(r, overlap_bytes=7)[0] for r in split_ranges([path], target_bytes=target)
        )
    except MeasureError as exc:
        got = (exc.code, exc.value)
    assert got == whole
