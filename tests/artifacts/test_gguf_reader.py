"""The GGUF reader: agrees with gguf and transformers on a real file, refuses damaged headers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from migrate._smollm2 import gguf_file
from tokembed.artifacts.gguf_reader import read_gguf_header, read_gguf_tensor
from tokembed.audit._source import facts_of
from tokembed.errors import CheckpointError


def _write_gguf(path: Path) -> torch.Tensor:
    """A llama-architecture GGUF file with a [6, 4] float32 input table; returns the table."""
    import numpy as np
    from gguf import GGUFWriter

    table = np.arange(24, dtype=np.float32).reshape(6, 4)
    w = GGUFWriter(str(path), "llama")
    w.add_vocab_size(6)
    w.add_embedding_length(4)
    w.add_token_list(["a", "b", "c", "d", "<s>", "</s>"])
    w.add_bos_token_id(4)
    w.add_tensor("token_embd.weight", table)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return torch.from_numpy(table)


def test_header_fields_tensor_infos_and_one_tensor(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    table = _write_gguf(path)
    header = read_gguf_header(path)
    assert header.fields["llama.vocab_size"] == 6
    assert header.fields["tokenizer.ggml.tokens"] == 6  # an array is kept as its length
    assert header.fields["tokenizer.ggml.bos_token_id"] == 4
    info = header.tensors["token_embd.weight"]
    assert (info.shape, info.type_name) == ((6, 4), "F32")  # torch order
    assert torch.equal(read_gguf_tensor(header, "token_embd.weight"), table)


def test_a_file_cut_short_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    _write_gguf(path)
    header = read_gguf_header(path)
    path.write_bytes(path.read_bytes()[: header.tensors["token_embd.weight"].offset + 8])
    with pytest.raises(CheckpointError) as e:  # the header still reads; the tensor does not fit
        read_gguf_tensor(read_gguf_header(path), "token_embd.weight")
    assert e.value.code == "MALFORMED_CHECKPOINT"
    (tmp_path / "x.gguf").write_bytes(b"GGUF\x03\x00")
    with pytest.raises(CheckpointError) as e:
        read_gguf_header(tmp_path / "x.gguf")
    assert e.value.message.endswith("not a readable GGUF file (truncated)")


@pytest.mark.slow
def test_gguf_header_reader_agrees_with_gguf_and_transformers() -> None:
    from gguf import GGUFReader
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    path = gguf_file()
    ours = read_gguf_header(path)
    theirs = GGUFReader(str(path))
    assert {
        t.name: (tuple(int(s) for s in reversed(t.shape)), t.tensor_type.name, int(t.data_offset))
        for t in theirs.tensors
    } == {t.name: (t.shape, t.type_name, t.offset) for t in ours.tensors.values()}
    assert ours.fields["tokenizer.ggml.tokens"] == len(theirs.fields["tokenizer.ggml.tokens"].data)
    peer = load_gguf_checkpoint(str(path), return_tensors=False)["config"]
    config = facts_of(path).config
    assert config is not None
    assert (config.vocab_size, config.hidden_size, config.tied, dict(config.role_ids)) == (
        peer["vocab_size"], peer["hidden_size"], peer["tie_word_embeddings"],
        {r: (peer[f"{r}_token_id"],) for r in ("bos", "eos", "pad", "unk")},
    )  # fmt: skip
    # The input table read at our offset equals gguf's own read of it, both dequantized by gguf.
    from gguf.quants import dequantize

    (table,) = [t for t in theirs.tensors if t.name == "token_embd.weight"]
    expected = torch.from_numpy(dequantize(table.data, table.tensor_type))
    assert torch.equal(facts_of(path).table_values(), expected)


def _gguf_bytes(*fields: bytes, tensors: int = 0) -> bytes:
    import struct

    head = b"GGUF" + struct.pack("<IQQ", 3, tensors, len(fields))
    return head + b"".join(fields)


@pytest.mark.parametrize(
    ("field", "why"),
    [
        # key "k", an array of 2**62 uint32: skipping it would seek past what a file offset holds
        (b"\x01" + b"\x00" * 7 + b"k" + bytes([9, 0, 0, 0, 4, 0, 0, 0]) + (2**62).to_bytes(8, "little"),
         "an array runs past the end"),
        # key "k", a string claiming 2**60 bytes
        (b"\x01" + b"\x00" * 7 + b"k" + bytes([8, 0, 0, 0]) + (2**60).to_bytes(8, "little"),
         "a string runs past the end"),
        # general.alignment = 0
        (len(b"general.alignment").to_bytes(8, "little") + b"general.alignment"
         + bytes([4, 0, 0, 0]) + (0).to_bytes(4, "little"), "alignment 0"),
    ],
)  # fmt: skip
def test_damaged_gguf_headers_are_refused(tmp_path: Path, field: bytes, why: str) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(_gguf_bytes(field))
    with pytest.raises(CheckpointError) as e:
        read_gguf_header(path)
    assert e.value.code == "MALFORMED_CHECKPOINT"
    assert e.value.message.endswith(f"not a readable GGUF file ({why})")
