"""Read a Hugging Face ``config.json`` into the text model's fields (shared, torch-free).

Both ``tokembed.measure`` (vocabulary sizes) and ``tokembed.embedding`` (table memory)
read ``vocab_size``/``hidden_size``/tying from the same file; this is the one place
that finds the file, parses it and descends into a multimodal ``text_config``. Each
caller raises INVALID_CONFIG with its own area's error class and checks its own fields.

Example::

    >>> path, fields = read_hf_config("models/llama", error=MeasureError)  # doctest: +SKIP
    >>> fields["vocab_size"]  # doctest: +SKIP
    128256
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokembed.errors import TokembedError, UsageError

__all__ = ["read_hf_config", "text_model_fields"]


def read_hf_config(
    source: str | Path, *, error: type[TokembedError]
) -> tuple[Path, dict[str, Any]]:
    """The file read (a folder means its ``config.json``) and the text model's fields.

    A config whose top level lacks ``vocab_size`` but has a ``text_config`` object
    (multimodal wrappers) yields that object (:func:`text_model_fields`).

    Raises:
        UsageError(FILE_NOT_FOUND): no file there.
        error(INVALID_CONFIG): not UTF-8 JSON, or not a JSON object.
    """
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise UsageError(
            "FILE_NOT_FOUND", f"no such config: {path}", value=str(path), fix="check the path"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise error(
            "INVALID_CONFIG",
            f"{path} is not JSON: {exc}",
            value=str(path),
            fix="pass an HF config.json",
        ) from None
    if not isinstance(data, dict):
        raise error(
            "INVALID_CONFIG",
            f"{path} is not a JSON object",
            value=str(path),
            fix="pass an HF config.json",
        )
    return path, text_model_fields(data)


def text_model_fields(data: Mapping[str, Any]) -> Any:
    """``data``, or its ``text_config`` when the top level lacks ``vocab_size`` (multimodal)."""
    text = data.get("text_config")
    return text if "vocab_size" not in data and isinstance(text, Mapping) else data
