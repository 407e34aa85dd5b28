"""What a model states about its vocabulary tables, read from a folder, a GGUF file or a module.

An admission check needs the config (V, width, role ids, tying, dtype, scale
convention), the names, shapes and stored dtypes of the input table and the
head, and the tokenizer address hash a checkpoint recorded. For a folder these
come from ``config.json`` and the safetensors *headers*; for a ``.gguf`` file
from its metadata and tensor infos (through the ``gguf`` package, memory-mapped,
nothing dequantized); for a live module from its config and parameters. Values
are read only by the checks that need them (:meth:`ModelFacts.table_values`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokembed.artifacts.config import (
    ModelConfig,
    model_config_from_dict,
    read_config_data,
)
from tokembed.artifacts.recorded_hash import recorded_address_hash
from tokembed.artifacts.safetensors_header import dtype_name, read_safetensors_header
from tokembed.errors import UsageError
from tokembed.files.os_errors import input_error

__all__ = ["ModelFacts", "TensorInfo", "facts_of"]

# Names an input table goes by when the architecture cannot be built to ask it.
_INPUT_HINTS = ("embed_tokens", "wte", "word_embeddings", "tok_embeddings", "embed_in", "shared")
_GGUF_INPUT, _GGUF_OUTPUT = "token_embd.weight", "output.weight"
_GGUF_FLOATS = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}


@dataclass(frozen=True, kw_only=True)
class TensorInfo:
    """Shape and stored dtype (``"float32"``, or a GGUF encoding such as ``"Q8_0"``)."""

    shape: tuple[int, ...]
    dtype: str
    encoded: bool = False  # a block-quantized encoding, dequantized on load


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """What one model source states; see the module docstring."""

    source: str
    kind: str  # "folder" | "gguf" | "module"
    config: ModelConfig | None
    tensors: Mapping[str, TensorInfo]
    input_key: str | None
    output_key: str | None
    address_hash: str | None
    address_source: str | None
    module: Any = None  # the nn.Module, for a module
    header: Any = None  # the parsed header, for a GGUF file
    weights: tuple[Path, ...] = ()
    raw_config: Mapping[str, Any] = field(default_factory=dict)

    def table_values(self, key: str | None = None) -> Any:
        """Values of tensor ``key`` (default: the input table) as torch (reads it only), or None."""
        key = self.input_key if key is None else key
        if key is None:
            return None
        if self.kind == "module":
            return self.module.get_parameter(key).detach()
        if self.kind == "gguf":
            from tokembed.artifacts.gguf_reader import read_gguf_tensor

            return read_gguf_tensor(self.header, key)
        from safetensors import safe_open

        for file in self.weights:
            with safe_open(str(file), "pt", device="cpu") as f:
                if key in f.keys():  # noqa: SIM118 (safe_open has no __contains__)
                    return f.get_tensor(key)
        return None


def _safetensors_tensors(headers: Mapping[Path, Mapping[str, Any]]) -> dict[str, TensorInfo]:
    out: dict[str, TensorInfo] = {}
    for header in headers.values():
        for name, entry in header.items():
            if name != "__metadata__":
                out[name] = TensorInfo(
                    shape=tuple(entry["shape"]), dtype=dtype_name(entry["dtype"])
                )
    return out


def _roles_of(model: Any) -> tuple[str | None, str | None]:
    """Input and output table names of a module (HF getters, else the first embedding)."""
    from torch import nn

    def name_of(getter: str) -> str | None:
        get = getattr(model, getter, None)
        target = get() if callable(get) else None
        for name, m in model.named_modules():
            if target is not None and m is target:
                return f"{name}.weight" if name else "weight"
        return None

    inputs = name_of("get_input_embeddings")
    if inputs is None:
        for name, m in model.named_modules():
            is_table = isinstance(m, nn.Embedding) or hasattr(m, "num_embeddings")
            if is_table and "weight" in m._parameters:
                inputs = f"{name}.weight" if name else "weight"
                break
    return inputs, name_of("get_output_embeddings")


def _folder_facts(path: Path) -> ModelFacts:
    config_file, raw = read_config_data(path)
    config = model_config_from_dict(raw, path=str(config_file))
    files = tuple(sorted(path.glob("*.safetensors")))
    headers = {file: read_safetensors_header(file) for file in files}  # each header read once
    tensors = _safetensors_tensors(headers)
    inputs = outputs = None
    if tensors:
        from tokembed.artifacts.models import instantiate_from_config

        # An architecture transformers does not provide is read by tensor names instead.
        with contextlib.suppress(UsageError):
            inputs, outputs = _roles_of(instantiate_from_config(path))
    if inputs is None:
        inputs = next(
            (
                n
                for n in tensors
                if any(h in n for h in _INPUT_HINTS) and len(tensors[n].shape) == 2
            ),
            None,
        )
    found = recorded_address_hash(headers)
    recorded, where = (None, None) if found is None else (found[0], str(found[1]))
    return ModelFacts(
        source=str(path),
        kind="folder",
        config=config,
        tensors=tensors,
        input_key=inputs,
        output_key=outputs,
        address_hash=recorded,
        address_source=where,
        weights=files,
        raw_config=raw,
    )


def gguf_config(fields: Mapping[str, Any], tensor_names: set[str], *, path: str) -> dict[str, Any]:
    """An HF-style config dict from GGUF metadata (``fields``: key → value)."""
    arch = str(fields.get("general.architecture", ""))
    tokens = fields.get("tokenizer.ggml.tokens")  # the reader keeps an array's length
    vocab = fields.get(f"{arch}.vocab_size") or (tokens if isinstance(tokens, int) else None)
    out: dict[str, Any] = {
        "model_type": arch or None,
        "vocab_size": vocab,
        "hidden_size": fields.get(f"{arch}.embedding_length"),
        # llama.cpp stores a tied head once, as the input table.
        "tie_word_embeddings": _GGUF_OUTPUT not in tensor_names,
    }
    for role, key in (("bos", "bos"), ("eos", "eos"), ("pad", "padding"), ("unk", "unknown")):
        value = fields.get(f"tokenizer.ggml.{key}_token_id")
        if value is not None:
            out[f"{role}_token_id"] = value  # a non-integer is refused as INVALID_CONFIG
    return out


def _gguf_facts(path: Path) -> ModelFacts:
    from tokembed.artifacts.gguf_reader import read_gguf_header

    header = read_gguf_header(path, strings=("tokenizer.ggml.tokens",))
    fields = dict(header.fields)
    tensors = {
        t.name: TensorInfo(
            shape=t.shape,
            dtype=_GGUF_FLOATS.get(t.type_name, t.type_name),
            encoded=t.type_name not in _GGUF_FLOATS,
        )
        for t in header.tensors.values()
    }
    raw = gguf_config(fields, set(tensors), path=str(path))
    return ModelFacts(
        source=str(path),
        kind="gguf",
        config=model_config_from_dict(raw, path=str(path)),
        tensors=tensors,
        input_key=_GGUF_INPUT if _GGUF_INPUT in tensors else None,
        output_key=_GGUF_OUTPUT if _GGUF_OUTPUT in tensors else None,
        address_hash=None,
        address_source=None,
        weights=(path,),
        raw_config=raw,
        header=header,
    )


def module_hash(model: Any) -> str | None:
    """The address hash a module is bound to: its config's, else its first bound table's."""
    found = getattr(getattr(model, "config", None), "address_hash", None)
    for m in [model, *model.modules()]:
        found = found or getattr(getattr(m, "config", None), "address_hash", None)
        found = found or getattr(m, "address_hash", None)
    return found if isinstance(found, str) else None


def _module_facts(model: Any) -> ModelFacts:
    inputs, outputs = _roles_of(model)
    tensors = {
        n: TensorInfo(shape=tuple(p.shape), dtype=str(p.dtype).removeprefix("torch."))
        for n, p in model.named_parameters(remove_duplicate=False)
    }
    hf = getattr(model, "config", None)
    raw: dict[str, Any] = hf.to_dict() if hf is not None and hasattr(hf, "to_dict") else {}
    if "vocab_size" not in raw and inputs is not None:  # a tokembed table: V and d are its shape
        v, d = tensors[inputs].shape
        raw = {"vocab_size": v, "hidden_size": d}
        pad = getattr(model.get_submodule(inputs.rpartition(".")[0]), "padding_idx", None)
        if pad is not None:
            raw["pad_token_id"] = pad
    config = model_config_from_dict(raw, path=type(model).__name__) if raw else None
    bound = module_hash(model)
    return ModelFacts(
        source=type(model).__name__,
        kind="module",
        config=config,
        tensors=tensors,
        input_key=inputs,
        output_key=outputs,
        address_hash=bound,
        address_source="module" if bound else None,
        module=model,
        raw_config=raw,
    )


def facts_of(model_or_dir: Any) -> ModelFacts:
    """Facts of a model folder (``config.json`` + safetensors), a ``.gguf`` file, or a module.

    A folder without ``config.json`` that holds exactly one ``.gguf`` file means that file.

    Raises:
        UsageError FILE_NOT_FOUND: no such path, or a folder with neither.
        UsageError FILE_UNREADABLE: the OS refused to read or search it.
        EmbeddingError INVALID_CONFIG: a config without a usable ``vocab_size``.
    """
    if not isinstance(model_or_dir, str | os.PathLike):
        return _module_facts(model_or_dir)
    path = Path(model_or_dir)
    try:
        if path.is_dir() and not (path / "config.json").is_file():
            ggufs = sorted(path.glob("*.gguf"))
            if len(ggufs) == 1:
                path = ggufs[0]
        is_gguf, exists = path.is_file() and path.suffix == ".gguf", path.exists()
    except OSError as exc:  # a folder that may not be searched
        raise input_error(exc, path) from None
    if is_gguf:
        return _gguf_facts(path)
    if not exists:
        raise UsageError(
            "FILE_NOT_FOUND",
            f"no such model: {path}",
            value=str(path),
            fix="pass a model folder (config.json, optional *.safetensors) or a .gguf file",
        )
    return _folder_facts(path if path.is_dir() else path.parent)
