"""Inspecting tokenizer artifacts on disk: which files, which encoding, which model config.

:func:`inspect_paths` turns command-line paths into :class:`VocabSizes`:

* any file or folder :func:`load_tokenizer` reads (our JSON, ``.tiktoken`` rank files,
  HF ``tokenizer.json``, GPT-2 ``vocab.json`` + ``merges.txt``);
* ``PATH@ENCODING`` names the tiktoken encoding whose special tokens and pattern a
  rank file uses (``o200k_base.tiktoken@o200k_harmony``; the spec is parsed by
  :func:`~tokembed.tokenizer.formats.specs.split_spec`); ``encoding=`` does the same
  for every rank file without one;
* an HF ``config.json`` applies to the tokenizer given just before it; a folder
  holding both a tokenizer and a ``config.json`` uses both.

Example::

    >>> [s.id_range for s in inspect_paths(["o200k_base.tiktoken"])]  # doctest: +SKIP
    [200019]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokembed.artifacts.config import read_model_config
from tokembed.errors import UsageError
from tokembed.measure.vocab_sizes import VocabSizes, vocab_sizes_of

__all__ = ["inspect_paths"]


def _is_config(path: Path) -> bool:
    return path.is_file() and path.name == "config.json"


def inspect_paths(paths: Sequence[str], *, encoding: str | None = None) -> list[VocabSizes]:
    """Vocabulary sizes of each tokenizer among ``paths`` (see module docstring).

    Raises:
        UsageError(FILE_NOT_FOUND): a path does not exist.
        UsageError(INVALID_ARGUMENT): a config.json comes before any tokenizer.
        FormatError: a tokenizer file cannot be read (codes from the readers).
        EmbeddingError(INVALID_CONFIG), MeasureError(VOCAB_BELOW_ID_RANGE).
    """
    from tokembed.tokenizer.formats import load_tokenizer
    from tokembed.tokenizer.formats.specs import split_spec

    out: list[VocabSizes] = []
    pending = None
    pending_name = ""

    def flush(config_path: Path | None) -> None:
        nonlocal pending
        if pending is not None:
            config = None if config_path is None else read_model_config(config_path)
            out.append(vocab_sizes_of(pending, config=config, name=pending_name))
            pending = None

    for spec in paths:
        name, enc = split_spec(spec)
        path = Path(name)
        if not path.exists():
            raise UsageError(
                "FILE_NOT_FOUND", f"no such path: {spec}", value=spec, fix="check the path"
            )
        if _is_config(path):
            if pending is None:
                raise UsageError(
                    "INVALID_ARGUMENT",
                    f"{path} is a model config but no tokenizer precedes it",
                    value=spec,
                    fix="list the tokenizer first, then its config.json",
                )
            flush(path)
            continue
        flush(None)
        is_ranks = path.is_file() and path.suffix == ".tiktoken"
        enc = enc or (encoding if is_ranks else None)
        pending = load_tokenizer(path, encoding=enc)
        pending_name = enc or pending.name or path.name
        if path.is_dir() and (path / "config.json").is_file():
            flush(path / "config.json")
    flush(None)
    return out
