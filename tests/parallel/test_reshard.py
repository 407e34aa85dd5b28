"""Row-sharded checkpoints: saved at one tensor-parallel size, read back at another.

Single-process tests write each rank's shard with ``save_shard`` (no collective
needed) and read rows for the intervals of another size; the distributed round
trips (save from a real group, load into a layer over a group of another size)
run in the shared whole-model spawn (``_whole_model``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from _whole_model import world_results
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.errors import ParallelError
from tokembed.parallel.intervals import row_intervals
from tokembed.parallel.reshard import MANIFEST_NAME, load_rows, read_layout, save_shard

HASH = "sha256:" + "ab" * 32  # the form of tokembed.tokenizer.model.address_hash


def _save(directory: Path, table: torch.Tensor, world_size: int, **kwargs: object) -> None:
    intervals = row_intervals(table.shape[0], world_size)
    for rank, (start, end) in enumerate(intervals):
        save_shard(
            directory,
            table[start:end],
            num_embeddings=table.shape[0],
            intervals=intervals,
            rank=rank,
            **kwargs,  # type: ignore[arg-type]
        )


@settings(max_examples=25, deadline=None)
@given(
    vocab=st.integers(1, 40),
    dim=st.integers(1, 5),
    saved_at=st.integers(1, 6),
    loaded_at=st.integers(1, 6),
)
def test_any_size_reads_back_the_same_logical_table(
    vocab: int, dim: int, saved_at: int, loaded_at: int
) -> None:
    table = torch.randn(vocab, dim, generator=torch.Generator().manual_seed(vocab * 7 + dim))
    with tempfile.TemporaryDirectory() as tmp:
        _save(Path(tmp), table, saved_at)
        layout = read_layout(tmp)
        assert layout.intervals == tuple(row_intervals(vocab, saved_at))
        pieces = [load_rows(tmp, s, e) for s, e in row_intervals(vocab, loaded_at)]
        assert [p.shape[0] for p in pieces] == [e - s for s, e in row_intervals(vocab, loaded_at)]
        assert torch.equal(torch.cat(pieces), table)


def test_manifest_records_the_logical_table(tmp_path: Path) -> None:
    _save(tmp_path, torch.zeros(131, 4, dtype=torch.bfloat16), 4, address_hash=HASH)
    raw = json.loads((tmp_path / MANIFEST_NAME).read_text())
    assert raw["num_embeddings"] == 131
    assert raw["embedding_dim"] == 4
    assert raw["dtype"] == "bfloat16"
    assert raw["intervals"] == [[0, 33], [33, 66], [66, 99], [99, 131]]
    assert raw["files"][3] == "shard-00003-of-00004.safetensors"
    assert raw["address_hash"] == HASH
    assert load_rows(tmp_path, 30, 36).dtype == torch.bfloat16


def _edit_manifest(directory: Path, **changes: object) -> None:
    raw = json.loads((directory / MANIFEST_NAME).read_text())
    raw.update(changes)
    (directory / MANIFEST_NAME).write_text(json.dumps(raw))


def _mismatch(directory: Path) -> ParallelError:
    with pytest.raises(ParallelError) as e:
        load_rows(directory, 0, 131)
    assert e.value.code == "SHARD_LAYOUT_MISMATCH"
    return e.value


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    _save(tmp_path, torch.randn(131, 4), 2)
    return tmp_path


def test_gap_in_manifest_intervals_is_refused(saved: Path) -> None:
    _edit_manifest(saved, intervals=[[0, 60], [66, 131]])
    assert "SHARD_GAP" in _mismatch(saved).message


@pytest.mark.failure_lab("1.4")
def test_overlap_in_manifest_intervals_is_refused(saved: Path) -> None:
    """Shard map accepted from local shapes alone."""
    _edit_manifest(saved, intervals=[[0, 70], [66, 131]])
    assert "SHARD_OVERLAP" in _mismatch(saved).message


def test_file_from_another_save_is_refused(
    saved: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other = tmp_path_factory.mktemp("other")
    _save(other, torch.randn(130, 4), 2)  # V=130: rank 1 holds rows [65, 130)
    name = "shard-00001-of-00002.safetensors"
    shutil.copy(other / name, saved / name)
    assert name in _mismatch(saved).message


def test_width_or_dtype_disagreeing_with_manifest_is_refused(saved: Path) -> None:
    _edit_manifest(saved, embedding_dim=8)
    _mismatch(saved)
    _edit_manifest(saved, embedding_dim=4, dtype="float16")
    _mismatch(saved)


def test_missing_file_and_foreign_manifest_are_refused(saved: Path) -> None:
    (saved / "shard-00001-of-00002.safetensors").unlink()
    assert "missing" in _mismatch(saved).message
    (saved / MANIFEST_NAME).write_text('{"format": "something-else"}')
    _mismatch(saved)
    (saved / MANIFEST_NAME).write_text("[1, 2]")  # JSON, but not an object
    _mismatch(saved)


def test_shard_with_wrong_row_count_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ParallelError) as e:
        save_shard(
            tmp_path,
            torch.zeros(10, 4),
            num_embeddings=131,
            intervals=row_intervals(131, 2),
            rank=0,
        )
    assert e.value.code == "SHARD_LAYOUT_MISMATCH"


def test_rows_outside_the_table_are_refused(saved: Path) -> None:
    with pytest.raises(ParallelError) as e:
        load_rows(saved, 100, 140)
    assert e.value.code == "SHARD_LAYOUT_MISMATCH"


# --- real groups ----------------------------------------------------------------


@pytest.mark.distributed
@pytest.mark.xdist_group("tokembed-whole-model")
@pytest.mark.parametrize("world_size", [2, 4])
def test_group_saved_shards_load_into_one_rank_table(world_size: int) -> None:
    for result in world_results(world_size):
        pair = result["reshard_to_1"]
        assert torch.equal(pair["loaded"], pair["full"])


@pytest.mark.distributed
@pytest.mark.xdist_group("tokembed-whole-model")
def test_tp2_shards_load_at_tp4_and_back() -> None:
    results = world_results(4)
    logical = results[0]["tp_dp"]["reshard"]["logical"]
    for rank, result in enumerate(results):
        reshard = result["tp_dp"]["reshard"]
        assert reshard["tp4_rows"] == row_intervals(131, 4)[rank]
        assert torch.equal(reshard["logical"], logical)  # DP replicas agree
        assert torch.equal(reshard["tp4"], logical)
        assert torch.equal(reshard["tp2_again"], logical)
        assert reshard["wrong_shape"] == "SHARD_LAYOUT_MISMATCH"
        # An untied vocabulary-parallel head reshards the same way.
        assert torch.equal(reshard["head_tp4"], reshard["head_logical"])


def _saved_table(tmp_path: Path) -> Path:
    table = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    _save(tmp_path, table, 2)
    return tmp_path


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(p.read_bytes()[:40]),  # truncated
        lambda p: p.write_bytes(b"\xff" * 8 + p.read_bytes()[8:]),  # header length garbled
        lambda p: p.write_bytes(b""),
        lambda p: p.write_bytes(p.read_bytes().replace(b'"vocab_start":"0"', b'"vocab_start":"x"')),
    ],
)
def test_damaged_shard_is_a_layout_mismatch(tmp_path: Path, damage: object) -> None:
    root = _saved_table(tmp_path)
    layout = read_layout(root)
    damage(root / layout.files[0])  # type: ignore[operator]
    with pytest.raises(ParallelError) as e:
        load_rows(root, 0, 6)
    assert e.value.code == "SHARD_LAYOUT_MISMATCH"
    if (root / layout.files[0]).stat().st_size < 100:  # unreadable, not just relabelled
        with pytest.raises(ParallelError) as e:
            load_rows(root, 0, 6, layout=layout)  # damaged after the layout was read
        assert e.value.code == "SHARD_LAYOUT_MISMATCH"


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.update(files=["../outside.safetensors", m["files"][1]]),
        lambda m: m.update(files=m["files"][:1]),
        lambda m: m.update(dtype="int64"),
        lambda m: m.update(intervals="xx"),
        lambda m: m.update(num_embeddings=-6),
        lambda m: m.update(files=["s" * 300, m["files"][1]]),  # found by fuzzing: name too long
    ],
)
def test_bad_layout_metadata_is_a_layout_mismatch(tmp_path: Path, edit: object) -> None:
    root = _saved_table(tmp_path)
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    edit(manifest)  # type: ignore[operator]
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ParallelError) as e:
        read_layout(root)
    assert e.value.code == "SHARD_LAYOUT_MISMATCH"


def test_manifest_nested_too_deeply_is_a_layout_mismatch(tmp_path: Path) -> None:
    root = _saved_table(tmp_path)
    (root / MANIFEST_NAME).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ParallelError) as e:
        read_layout(root)
    assert e.value.code == "SHARD_LAYOUT_MISMATCH"


def _load_non_finite(rank: int, world_size: int, directory: str) -> tuple[str, bool]:
    from tokembed.errors import EmbeddingError
    from tokembed.parallel.reshard import load_vocab_shards
    from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

    emb = VocabParallelEmbedding(6, 4)
    before = emb.weight.detach().clone()
    try:
        load_vocab_shards(emb, directory)
    except EmbeddingError as error:
        return error.code, bool(torch.equal(before, emb.weight))
    return "loaded", False


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_rows_are_refused_and_the_layer_is_unchanged(tmp_path: Path, bad: float) -> None:
    from _harness import run_ranks

    table = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    table[4, 1] = bad
    _save(tmp_path, table, 2)
    assert run_ranks(_load_non_finite, 1, str(tmp_path)) == [("NON_FINITE_VALUES", True)]
