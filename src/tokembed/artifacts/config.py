"""Read a Hugging Face ``config.json`` into the fields of its text model (torch-free).

The one place that finds the file (a folder means its ``config.json``), parses it,
descends into a multimodal ``text_config`` and reads the fields that vocabulary
tables depend on: ``vocab_size``, the hidden width (``hidden_size``, GPT-2's
``n_embd`` or T5's ``d_model``), ``tie_word_embeddings`` and ALBERT's
``embedding_size``; and the fields a tokenizer/model pair is admitted on: the
role ids (``bos_token_id``, ``eos_token_id`` (an int or a list), ``pad_token_id``,
``unk_token_id``), the declared ``dtype`` (or ``torch_dtype``), ``model_type``
and ``scale_embedding``. Fields a config does not state are None; each calculation
decides which ones it needs (:func:`tokembed.measure.memory.load_table_config`
needs all three of V, width and tying; ``tokembed inspect`` only V).

Example::

    >>> cfg = model_config_from_dict({"vocab_size": 49152, "hidden_size": 576,
    ...                               "tie_word_embeddings": True})
    >>> cfg.vocab_size, cfg.hidden_size, cfg.tied
    (49152, 576, True)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokembed.errors import EmbeddingError, UsageError
from tokembed.files.os_errors import input_error, read_file_bytes

__all__ = [
    "ModelConfig",
    "config_path",
    "model_config_from_dict",
    "read_config_data",
    "read_model_config",
    "text_model_fields",
]

_WIDTH_KEYS = ("hidden_size", "n_embd", "d_model")
_ROLES = ("bos", "eos", "pad", "unk")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """What an HF config says about the vocabulary tables (None: not stated)."""

    path: str | None
    vocab_size: int
    hidden_size: int | None = None
    tied: bool | None = None
    embedding_size: int | None = None
    # Role -> ids the config names for it ("bos", "eos", "pad", "unk"); roles it leaves
    # null are absent. Values are kept as stated (a negative PAD id is reported, not refused).
    role_ids: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dtype: str | None = None
    model_type: str | None = None
    scale_embedding: bool | None = None


def text_model_fields(data: Mapping[str, Any]) -> Any:
    """``data``, or its ``text_config`` when the top level lacks ``vocab_size`` (multimodal)."""
    text = data.get("text_config")
    return text if "vocab_size" not in data and isinstance(text, Mapping) else data


def _invalid(where: str, message: str, value: object) -> EmbeddingError:
    return EmbeddingError(
        "INVALID_CONFIG",
        f"{where}: {message}",
        value=value,
        fix="pass the model's config.json (it must state a positive integer vocab_size)",
    )


def _positive(data: Mapping[str, Any], key: str, where: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _invalid(where, f"{key} must be a positive integer, got {value!r}", value)
    return value


def _ids(data: Mapping[str, Any], key: str, where: str) -> tuple[int, ...] | None:
    value = data.get(key)
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if not items or any(isinstance(v, bool) or not isinstance(v, int) for v in items):
        raise _invalid(
            where, f"{key} must be an integer or a list of integers, got {value!r}", value
        )
    return tuple(items)


def _text(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid(where, f"{key} must be a string, got {value!r}", value)
    return value


def model_config_from_dict(data: Mapping[str, Any], *, path: str | None = None) -> ModelConfig:
    """:class:`ModelConfig` of a parsed config (its ``text_config`` when multimodal).

    Raises:
        EmbeddingError(INVALID_CONFIG): no positive integer ``vocab_size``; a width
            that is not a positive integer; ``tie_word_embeddings`` or ``scale_embedding``
            not true/false; a role id that is not an integer (or list of them); a
            ``dtype`` or ``model_type`` that is not a string.
    """
    where = path or "config"
    fields = text_model_fields(data)
    vocab = _positive(fields, "vocab_size", where)
    if vocab is None:
        raise _invalid(where, "no vocab_size", None)
    width_key = next((k for k in _WIDTH_KEYS if fields.get(k) is not None), "hidden_size")
    tied = fields.get("tie_word_embeddings")
    if tied is not None and not isinstance(tied, bool):
        raise _invalid(where, f"tie_word_embeddings must be true/false, got {tied!r}", tied)
    scale = fields.get("scale_embedding")
    if scale is not None and not isinstance(scale, bool):
        raise _invalid(where, f"scale_embedding must be true/false, got {scale!r}", scale)
    roles = {r: _ids(fields, f"{r}_token_id", where) for r in _ROLES}
    dtype = _text(fields, "dtype", where) or _text(fields, "torch_dtype", where)
    return ModelConfig(
        path=path,
        vocab_size=vocab,
        hidden_size=_positive(fields, width_key, where),
        tied=tied,
        embedding_size=_positive(fields, "embedding_size", where),
        role_ids={r: ids for r, ids in roles.items() if ids is not None},
        dtype=dtype,
        model_type=_text(fields, "model_type", where),
        scale_embedding=scale,
    )


def config_path(source: str | Path) -> Path:
    """The ``config.json`` that ``source`` names (a folder means the file inside it).

    Raises:
        UsageError(FILE_NOT_FOUND): no file there.
    """
    path = Path(source)
    try:
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise UsageError(
                "FILE_NOT_FOUND", f"no such config: {path}", value=str(path), fix="check the path"
            )
    except OSError as exc:  # a name too long is not "missing" to Path.is_file
        raise input_error(exc, path) from None
    return path


def read_config_data(source: str | Path) -> tuple[Path, dict[str, Any]]:
    """The path of the ``config.json`` that ``source`` names and its parsed JSON object.

    Raises: as :func:`read_model_config`, except for the field checks.
    """
    path = config_path(source)
    raw = read_file_bytes(path)
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise _invalid(str(path), f"not JSON ({exc})", str(path)) from None
    except RecursionError:
        raise _invalid(str(path), "JSON nested too deeply", str(path)) from None
    if not isinstance(data, dict):
        raise _invalid(str(path), "not a JSON object", str(path))
    return path, data


def read_model_config(source: str | Path) -> ModelConfig:
    """:class:`ModelConfig` of the file ``source`` (a folder means its ``config.json``).

    Raises:
        UsageError(FILE_NOT_FOUND): no file there.
        UsageError(FILE_UNREADABLE, NAME_TOO_LONG): the OS refused to read it.
        EmbeddingError(INVALID_CONFIG): not UTF-8 JSON, not an object, or bad fields
            (see :func:`model_config_from_dict`).
    """
    path, data = read_config_data(source)
    return model_config_from_dict(data, path=str(path))
