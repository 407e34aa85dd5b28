"""Reading an HF config.json: damaged files and unreadable paths are coded errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokembed.artifacts.config import read_model_config
from tokembed.errors import EmbeddingError, UsageError


def test_config_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(EmbeddingError) as e:
        read_model_config(tmp_path)
    assert e.value.code == "INVALID_CONFIG"


def test_config_path_problems_are_coded(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as e:
        read_model_config(tmp_path / ("c" * 300 + ".json"))
    assert e.value.code == "NAME_TOO_LONG"
    (tmp_path / "config.json").mkdir()  # a folder where the file should be
    with pytest.raises(UsageError) as e:
        read_model_config(tmp_path)
    assert e.value.code == "FILE_NOT_FOUND"


def test_config_with_a_vocab_size_loads(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"vocab_size": 7, "hidden_size": 4}')
    cfg = read_model_config(tmp_path)
    assert (cfg.vocab_size, cfg.hidden_size, cfg.tied) == (7, 4, None)


def test_role_ids_dtype_and_scale_convention_are_read(tmp_path: Path) -> None:
    from conftest import data_path

    cfg = read_model_config(data_path("tokenizers", "smollm2-135m"))
    assert dict(cfg.role_ids) == {"bos": (1,), "eos": (2,), "pad": (2,), "unk": (0,)}
    assert (cfg.dtype, cfg.model_type, cfg.scale_embedding) == ("float32", "llama", None)
    (tmp_path / "config.json").write_text(
        '{"vocab_size": 7, "eos_token_id": [5, 6], "pad_token_id": -1, "torch_dtype": "bfloat16",'
        ' "scale_embedding": true, "bos_token_id": null}'
    )
    cfg = read_model_config(tmp_path)
    # A negative PAD id is kept as stated: admission reports it, reading does not refuse it.
    assert dict(cfg.role_ids) == {"eos": (5, 6), "pad": (-1,)}
    assert (cfg.dtype, cfg.scale_embedding) == ("bfloat16", True)


@pytest.mark.parametrize(
    "field",
    [
        '"eos_token_id": "2"',
        '"pad_token_id": [true]',
        '"scale_embedding": 1',
        '"dtype": 32',
        '"eos_token_id": []',
    ],
)
def test_malformed_admission_fields_are_invalid_config(tmp_path: Path, field: str) -> None:
    (tmp_path / "config.json").write_text('{"vocab_size": 7, ' + field + "}")
    with pytest.raises(EmbeddingError) as e:
        read_model_config(tmp_path)
    assert e.value.code == "INVALID_CONFIG"
