"""Row-sharded checkpoints: saved at one tensor-parallel size, read back at another.

Single-process tests write every rank's shard at once with ``save_shards`` (the
same distributed checkpoint folder a group writes) and read rows for the
intervals of another size; the distributed round trips (save from a real group,
load into a layer over a group of another size) run in the shared whole-model
spawn (``_whole_model``).
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from _whole_model import world_results
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.artifacts.dcp_io import TensorPiece, write_dcp
from tokembed.artifacts.dcp_metadata import read_dcp_record
from tokembed.errors import ParallelError, TokembedError
from tokembed.parallel.intervals import row_intervals
from tokembed.parallel.reshard import load_rows, read_layout, save_shards

HASH = "sha256:" + "ab" * 32  # the form of tokembed.tokenizer.model.address_hash


def _save(directory: Path, table: torch.Tensor, world_size: int, **kwargs: object) -> Path:
    intervals = row_intervals(table.shape[0], world_size)
    return save_shards(
        directory,
        [table[start:end] for start, end in intervals],
        num_embeddings=table.shape[0],
        intervals=intervals,
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
        root = _save(Path(tmp) / "ck", table, saved_at)
        layout = read_layout(root)
        # Empty tail shards hold no chunk: the saved intervals are the non-empty ones.
        assert layout.intervals == tuple(
            iv for iv in row_intervals(vocab, saved_at) if iv[1] > iv[0]
        )
        pieces = [load_rows(root, s, e) for s, e in row_intervals(vocab, loaded_at)]
        assert [p.shape[0] for p in pieces] == [e - s for s, e in row_intervals(vocab, loaded_at)]
        assert torch.equal(torch.cat(pieces), table)


def test_the_record_names_the_logical_table(tmp_path: Path) -> None:
    root = _save(tmp_path / "ck", torch.zeros(131, 4, dtype=torch.bfloat16), 4, address_hash=HASH)
    record = read_dcp_record(root)
    assert record is not None
    assert record["tensors"] == {"weight": {"shape": [131, 4], "dtype": "bfloat16"}}
    assert record["layout"]["tables"]["weight"]["intervals"] == [
        [0, 33],
        [33, 66],
        [66, 99],
        [99, 131],
    ]
    assert record["address_hash"] == HASH
    layout = read_layout(root)
    assert (layout.num_embeddings, layout.embedding_dim, layout.dtype) == (131, 4, "bfloat16")
    assert layout.address_hash == HASH
    assert load_rows(root, 30, 36).dtype == torch.bfloat16


def _mismatch(directory: Path) -> ParallelError:
    with pytest.raises(ParallelError) as e:
        load_rows(directory, 0, 131)
    assert e.value.code == "SHARD_LAYOUT_MISMATCH"
    return e.value


def _written(tmp_path: Path, cuts: list[tuple[int, int]]) -> Path:
    """A folder whose chunks are ``cuts`` of a [131, 4] table, written past save_shards' checks."""
    table = torch.randn(131, 4)
    pieces = [
        TensorPiece(name="weight", shape=(131, 4), offset=(a, 0), tensor=table[a:b])
        for a, b in cuts
    ]
    return write_dcp(tmp_path / "cut", pieces, record={})


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    return _save(tmp_path / "saved", torch.randn(131, 4), 2)


def test_gap_in_saved_intervals_is_refused(tmp_path: Path) -> None:
    assert "SHARD_GAP" in _mismatch(_written(tmp_path, [(0, 60), (66, 131)])).message


@pytest.mark.failure_lab("1.4")
def test_overlap_in_saved_intervals_is_refused(tmp_path: Path) -> None:
    """Shard map accepted from local shapes alone."""
    # DCP's own planner refuses to write overlapping chunks; a folder edited afterwards
    # (here: a plain DCP folder whose first chunk claims 70 rows) is refused on reading.
    root = _written(tmp_path, [(0, 66), (66, 131)])
    meta = pickle.loads((root / ".metadata").read_bytes())
    first = meta.state_dict_metadata["weight"].chunks[0]
    first.sizes = torch.Size([70, 4])
    (root / ".metadata").write_bytes(pickle.dumps(meta))
    (root / "tokembed.json").unlink()
    assert "SHARD_OVERLAP" in _mismatch(root).message


def test_file_from_another_save_is_refused(
    saved: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other = _save(tmp_path_factory.mktemp("other") / "ck", torch.randn(130, 4), 2)
    for name in ("__0_0.distcp", ".metadata"):
        damaged = saved.with_name(f"mixed{name}")
        shutil.copytree(saved, damaged)
        shutil.copy(other / name, damaged / name)
        with pytest.raises(TokembedError) as e:
            load_rows(damaged, 0, 131)
        assert e.value.code in {"MALFORMED_CHECKPOINT", "CHECKPOINT_SHARD_MISSING"}


def test_missing_file_and_a_folder_without_a_table_are_refused(saved: Path, tmp_path: Path) -> None:
    (saved / "__0_0.distcp").unlink()
    with pytest.raises(TokembedError) as e:
        load_rows(saved, 0, 131)
    assert e.value.code == "CHECKPOINT_SHARD_MISSING"
    other = write_dcp(
        tmp_path / "other",
        [TensorPiece(name="bias", shape=(3,), offset=(0,), tensor=torch.ones(3))],
        record={},
    )
    _mismatch(other)


def test_shard_with_wrong_row_count_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ParallelError) as e:
        save_shards(
            tmp_path / "ck",
            [torch.zeros(10, 4), torch.zeros(65, 4)],
            num_embeddings=131,
            intervals=row_intervals(131, 2),
        )
    assert e.value.code == "SHARD_LAYOUT_MISMATCH"
    assert not (tmp_path / "ck").exists()


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
    return _save(tmp_path / "ck", table, 2)


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(p.read_bytes()[:40]),  # truncated
        lambda p: p.write_bytes(p.read_bytes() + b"\0"),  # longer than recorded
        lambda p: p.write_bytes(b""),
        lambda p: p.write_bytes(b"\xff" * 64 + p.read_bytes()[64:]),  # bytes damaged in place
    ],
)
def test_damaged_data_file_is_refused_with_a_code(tmp_path: Path, damage: object) -> None:
    root = _saved_table(tmp_path)
    layout = read_layout(root)
    damage(root / layout.files[0])  # type: ignore[operator]
    with pytest.raises(TokembedError) as e:
        load_rows(root, 0, 6)
    assert e.value.code in {"CHECKPOINT_SHARD_MISSING", "MALFORMED_CHECKPOINT"}


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(p.read_bytes()[:40]),
        lambda p: p.write_bytes(b"[" * 100_000),
        lambda p: p.write_bytes(b"\x80\x04K\x01."),  # a pickle of an int
    ],
)
def test_damaged_metadata_is_malformed(tmp_path: Path, damage: object) -> None:
    root = _saved_table(tmp_path)
    damage(root / ".metadata")  # type: ignore[operator]
    with pytest.raises(TokembedError) as e:
        read_layout(root)
    assert e.value.code == "MALFORMED_CHECKPOINT"


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
    root = _save(tmp_path / "ck", table, 2)
    assert run_ranks(_load_non_finite, 1, str(root)) == [("NON_FINITE_VALUES", True)]
