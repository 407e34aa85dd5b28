"""Every reader of outside data either loads a byte string or raises a TokembedError.

Each reader gets three kinds of input: arbitrary bytes, a valid file with random byte
damage (flips, cuts, insertions, repeats), and, for JSON formats, a valid document with
one value replaced by arbitrary JSON. A reader must never raise anything but a
``TokembedError`` (no ``KeyError``, ``RecursionError``, ``SafetensorError`` ...). Each
example also runs under a deadline: inputs are at most a few KB, so a reader that needs
seconds for one is super-linear somewhere.

The budget is a hypothesis profile: ``TOKEMBED_FUZZ=ci`` (the default, a few seconds
per reader, what ``make test`` runs) or ``TOKEMBED_FUZZ=release`` (thousands of
examples per reader, run before a release; see DEVELOPERS.md).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokembed.artifacts.config import read_model_config
from tokembed.errors import TokembedError
from tokembed.measure.corpus import load_corpus
from tokembed.parallel.intervals import row_intervals
from tokembed.parallel.reshard import load_rows, read_layout, save_shards
from tokembed.tokenizer.bytes_unicode import BYTE_TO_CHAR
from tokembed.tokenizer.formats import export_hf, export_tiktoken, load_tokenizer, save_tokenizer
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.tokenizer import Tokenizer

_COMMON = {
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "derandomize": False,
    "database": None,
}
settings.register_profile(
    "fuzz-ci", max_examples=60, deadline=timedelta(seconds=10), **_COMMON
)  # fmt: skip
settings.register_profile(
    "fuzz-release", max_examples=5000, deadline=timedelta(seconds=10), **_COMMON
)  # fmt: skip
_FUZZ = settings.get_profile("fuzz-" + os.environ.get("TOKEMBED_FUZZ", "ci"))

# A small tokenizer whose files seed the mutations: all 256 bytes, two merges, a special.
_TOK = Tokenizer(
    pretokenizer=Pretokenizer.preset("gpt2"),
    tables=BPETables.byte_level(merges=[(104, 105), (256, 33)], specials={"<|end|>": 300}),
)
_PROBE = "hi! héllo 12 <|end|> 中"


def _gguf_seed(path: Path) -> bytes:
    """A llama-architecture GGUF file: six tokens, a [6, 4] float32 input table, BOS and EOS ids."""
    import numpy as np
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), "llama")
    w.add_vocab_size(6)
    w.add_embedding_length(4)
    w.add_token_list(["a", "b", "c", "d", "<s>", "</s>"])
    w.add_bos_token_id(4)
    w.add_eos_token_id(5)
    w.add_tensor("token_embd.weight", np.arange(24, dtype=np.float32).reshape(6, 4))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def _gguf_facts(root: Path) -> object:
    from tokembed.audit._source import facts_of

    facts = facts_of(root / "m.gguf")
    return facts, facts.table_values()  # the header, then the tensor bytes it points at


def _roles(root: Path) -> object:
    from tokembed.audit.pair import check_pair

    return check_pair(root, root, read_values=False)  # roles beside the tokenizer, the config


def _seed_files() -> dict[str, dict[str, bytes]]:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        native = save_tokenizer(_TOK, root / "native.json").read_bytes()
        hf = export_hf(_TOK, root / "tokenizer.json").read_bytes()
        ranks = export_tiktoken(_TOK, root / "tt")
        table = torch.arange(24, dtype=torch.float32).reshape(6, 4)
        intervals = row_intervals(6, 2)
        save_shards(
            root / "shards",
            [table[s:e] for s, e in intervals],
            num_embeddings=6,
            intervals=intervals,
        )
        shard_files = {p.name: p.read_bytes() for p in (root / "shards").iterdir()}
        return {
            "gguf": {"m.gguf": _gguf_seed(root / "m.gguf")},
            "roles": {
                "tokenizer.json": hf,
                "tokenizer_config.json": b'{"bos_token": "<|end|>", "eos_token": {"content":'
                b' "<|end|>"}, "pad_token": null}',
                "config.json": b'{"vocab_size": 301, "hidden_size": 4, "bos_token_id": 300,'
                b' "eos_token_id": [300]}',
            },
            "native": {"t.json": native},
            "hf": {"tokenizer.json": hf},
            "ranks": {
                "t.tiktoken": ranks.read_bytes(),
                "t.tiktoken.json": ranks.with_name(ranks.name + ".json").read_bytes(),
            },
            "gpt2": {
                "vocab.json": json.dumps(
                    {BYTE_TO_CHAR[b]: b for b in range(256)} | {"hi": 256, "hi!": 257}
                ).encode(),
                "merges.txt": b"#version: 0.2\nh i\nhi !\n",
            },
            "conllu": {
                "x.conllu": "# newdoc id = d1\n# sent_id = s1\n# text = Hi there.\n"
                "1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_\n\n# sent_id = s2\n# text = Ещё.\n"
                "1\tЕщё\tещё\tADV\t_\t_\t0\troot\t_\t_\n".encode()
            },
            "config": {"config.json": b'{"vocab_size": 6, "hidden_size": 4, "text_config": {}}'},
            "shards": shard_files,
        }


_SEEDS = _seed_files()

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def _damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with a few random edits (a flip, a cut, an insertion, a repeat)."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "repeat", "truncate"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "flip" and out:
            out[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del out[at : at + draw(st.integers(1, 16))]
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "repeat":
            out[at:at] = out[at : at + draw(st.integers(1, 32))] * draw(st.integers(2, 20))
        else:
            del out[at:]
    return bytes(out)


def _paths(doc: Any) -> list[list[Any]]:
    """Every path (keys and indices) to a value inside the JSON document ``doc``."""
    out: list[list[Any]] = [[]]
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    )
    for key, value in list(items)[:40]:  # the first entries of long tables suffice
        out += [[key, *rest] for rest in _paths(value)]
    return out


@st.composite
def _json_edited(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` (JSON) with one value, anywhere, replaced by arbitrary JSON, or removed."""
    doc = json.loads(data)
    path = draw(st.sampled_from(_paths(doc)[1:]))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(_json_values)
    return json.dumps(doc).encode()


def _variants(kind: str, name: str) -> st.SearchStrategy[bytes]:
    seed = _SEEDS[kind][name]
    options = [st.binary(max_size=512), _damaged(seed)]
    if name.endswith(".json"):
        options.append(_json_edited(seed))
    return st.one_of(options)


@st.composite
def _file_set(draw: st.DrawFn, kind: str) -> dict[str, bytes]:
    """The seed files of ``kind`` with one of them replaced by a variant."""
    files = dict(_SEEDS[kind])
    target = draw(st.sampled_from(sorted(files)))
    files[target] = draw(_variants(kind, target))
    return files


def _must_load_or_refuse(files: dict[str, bytes], read: Callable[[Path], object]) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for name, data in files.items():
            (root / name).write_bytes(data)
        try:
            loaded = read(root)
        except TokembedError:
            return
        if isinstance(loaded, Tokenizer):  # what loads must also work
            try:
                ids = loaded.encode(_PROBE, allowed_special="all")
                loaded.decode(ids, errors="replace")
            except TokembedError:
                pass


_READERS: dict[str, Callable[[Path], object]] = {
    "native": lambda root: load_tokenizer(root / "t.json"),
    "hf": lambda root: load_tokenizer(root),
    "ranks": lambda root: load_tokenizer(root / "t.tiktoken"),
    "gpt2": lambda root: load_tokenizer(root),
    "conllu": lambda root: load_corpus(root / "x.conllu"),
    "config": lambda root: read_model_config(root),
    "shards": lambda root: load_rows(root, 0, read_layout(root).num_embeddings),
    "gguf": _gguf_facts,
    "roles": _roles,
}


@pytest.mark.parametrize("kind", sorted(_READERS))
def test_seed_files_load(kind: str) -> None:
    # The mutations start from files that load, so a refusal is the damage's doing.
    with tempfile.TemporaryDirectory() as d:
        for name, data in _SEEDS[kind].items():
            (Path(d) / name).write_bytes(data)
        assert _READERS[kind](Path(d)) is not None


def _fuzz(kind: str) -> Callable[[], None]:
    @_FUZZ
    @given(files=_file_set(kind))
    def run(files: dict[str, bytes]) -> None:
        _must_load_or_refuse(files, _READERS[kind])

    return run


test_fuzz_native_json = _fuzz("native")
test_fuzz_hf_tokenizer_json = _fuzz("hf")
test_fuzz_tiktoken_rank_file_and_sidecar = _fuzz("ranks")
test_fuzz_gpt2_vocab_and_merges = _fuzz("gpt2")
test_fuzz_conllu = _fuzz("conllu")
test_fuzz_hf_config_json = _fuzz("config")
test_fuzz_vocab_shard_checkpoint_folder = _fuzz("shards")
test_fuzz_gguf_header_and_table = _fuzz("gguf")
test_fuzz_tokenizer_config_roles = _fuzz("roles")
