"""|I|, R, holes, aliases and V of real artifacts, with V from the model's config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _measure_data import loaded, tokenizer_path

from tokembed.artifacts.config import ModelConfig, read_model_config
from tokembed.errors import EmbeddingError, MeasureError, UsageError
from tokembed.measure.artifacts import inspect_paths
from tokembed.measure.vocab_sizes import vocab_sizes, vocab_sizes_of
from tokembed.tokenizer.formats.specs import split_spec


@pytest.mark.slow
def test_o200k_base_and_harmony() -> None:
    from tokembed.tokenizer.formats.encodings import encoding_spec

    tok = loaded("o200k_base.tiktoken")
    base = vocab_sizes_of(tok)
    assert base.mergeable_ids == 199_998
    assert sorted(tok.tables.specials.values()) == [199_999, 200_018]
    assert (base.unique_ids, base.id_range, base.holes) == (200_000, 200_019, 19)
    assert base.hole_ranges == [(199_998, 199_998), (200_000, 200_017)]
    # o200k_harmony = o200k_base ranks + the tiktoken package's harmony special tokens
    harmony = vocab_sizes(
        name="o200k_harmony",
        ordinary_ids=tok.tables.pieces,
        specials=encoding_spec("o200k_harmony").specials,
    )
    assert (harmony.special_names, harmony.special_ids) == (1_091, 1_090)
    assert harmony.unique_ids == 199_998 + 1_090 == 201_088
    assert harmony.aliases == {200_018: ("<|endofprompt|>", "<|reserved_200018|>")}
    assert harmony.holes == 0


def test_cl100k_base() -> None:
    (s,) = inspect_paths([tokenizer_path("cl100k_base.tiktoken")])
    assert (s.mergeable_ids, s.special_ids, s.unique_ids, s.id_range) == (
        100_256,
        5,
        100_261,
        100_277,
    )
    assert s.hole_ranges == [(100_256, 100_256), (100_261, 100_275)]
    assert s.holes == 16
    assert s.model_rows is None


def test_smollm2_with_its_config() -> None:
    (s,) = inspect_paths(
        [tokenizer_path("smollm2-135m/tokenizer.json"), tokenizer_path("smollm2-135m/config.json")]
    )
    assert (s.mergeable_ids, s.special_ids, s.unique_ids, s.id_range) == (
        49_135,
        17,
        49_152,
        49_152,
    )
    assert (s.model_rows, s.unreached_rows, s.holes) == (49_152, 0, 0)
    assert s.model is not None
    assert (s.model.hidden_size, s.model.tied) == (576, True)  # the model's own width
    assert s.address_hash == loaded("smollm2-135m/tokenizer.json").address_hash
    # a folder holding both files uses both
    (f,) = inspect_paths([tokenizer_path("smollm2-135m")])
    assert f.to_dict() == s.to_dict()


def test_config_below_the_id_range(tmp_path: Path) -> None:
    cfg = json.loads(Path(tokenizer_path("smollm2-135m/config.json")).read_text())
    cfg["vocab_size"] = 49_000
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(MeasureError) as e:
        inspect_paths(
            [tokenizer_path("smollm2-135m/tokenizer.json"), str(tmp_path / "config.json")]
        )
    assert e.value.code == "VOCAB_BELOW_ID_RANGE"
    assert e.value.value == (49_000, 49_152)


def test_config_without_vocab_size(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(EmbeddingError) as e:
        read_model_config(tmp_path)
    assert e.value.code == "INVALID_CONFIG"
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 7}}))
    assert read_model_config(tmp_path / "config.json").vocab_size == 7


def test_config_before_any_tokenizer() -> None:
    with pytest.raises(UsageError) as e:
        inspect_paths([tokenizer_path("smollm2-135m/config.json")])
    assert e.value.code == "INVALID_ARGUMENT"


def test_rows_past_the_range_are_unreached() -> None:
    s = vocab_sizes(
        name="toy",
        ordinary_ids=range(256),
        specials={"<a>": 300, "<b>": 300},
        model=ModelConfig(path=None, vocab_size=320),
    )
    assert (s.unique_ids, s.id_range, s.holes, s.unreached_rows) == (257, 301, 44, 63)
    assert s.aliases == {300: ("<a>", "<b>")}
    assert s.hole_ranges == [(256, 299)]


def test_encoding_suffix() -> None:
    path = tokenizer_path("cl100k_base.tiktoken")
    assert split_spec(f"{path}@cl100k_base") == (path, "cl100k_base")
    assert split_spec(path) == (path, None)
