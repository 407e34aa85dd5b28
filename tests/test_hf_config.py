"""Reading an HF config.json: damaged files and unreadable paths are coded errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokembed._hf_config import read_model_config
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
