"""A transformers model from its files: loaded with its weights, or built empty from its config.

Two ways the project turns a model on disk into a module, both through
``transformers`` (imported when called, as is torch):

* :func:`load_model` — the causal language model of a folder (``config.json``
  and safetensors weights) or of a ``.gguf`` file (read through the ``gguf``
  package and dequantized to float32), in its stored dtype, in eval mode. The
  migration command and the token audit both read models with it, so a model
  that one of them accepts the other accepts too.
* :func:`check_model_source` — the one validation of a model on disk, run by
  :func:`load_model` before any weight is read (so ``migrate`` and ``audit`` refuse
  a malformed folder or file with a code in milliseconds, as ``check`` does): the
  config's fields and ``model_type``, the safetensors headers of every weights file
  (:func:`~tokembed.artifacts.safetensors_header.read_safetensors_header`), or the
  GGUF header and its input table.
* :func:`instantiate_from_config` — the folder's architecture on the meta device:
  parameter names, shapes and tie declarations without memory or weights, for
  checks that compare a config's claims with what the files store.

:func:`parameter_owner` resolves a dotted parameter name to the module that
registers it; checkpoints (re-pointing aliases), tying conversions and migration
(replacing tables) all re-register Parameters through it.

Example::

    >>> model = load_model(Path("SmolLM2-135M-Instruct.Q4_1.gguf"))  # doctest: +SKIP
    >>> model.get_input_embeddings().weight.shape  # doctest: +SKIP
    torch.Size([49152, 576])
    >>> empty = instantiate_from_config("models/smollm2")  # doctest: +SKIP
    >>> empty.lm_head.weight.device.type  # doctest: +SKIP
    'meta'
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokembed.artifacts.config import model_config_from_dict, read_config_data
from tokembed.errors import CheckpointError, EmbeddingError, UsageError

if TYPE_CHECKING:
    from torch import nn

__all__ = ["check_model_source", "instantiate_from_config", "load_model", "parameter_owner"]


def check_model_source(path: str | os.PathLike[str]) -> Path:
    """Validate a model folder or ``.gguf`` file before any work; the path to load.

    A folder needs a ``config.json`` object whose fields have their types
    (:func:`~tokembed.artifacts.config.model_config_from_dict`) and whose
    ``model_type`` transformers knows, and safetensors weights whose headers pass
    the one header validator. Any other file must be a GGUF file with a valid
    header that stores ``token_embd.weight``.

    Raises:
        UsageError FILE_NOT_FOUND: no such path; a folder without weights.
        UsageError FILE_UNREADABLE: a FIFO, a device or an unreadable path.
        UsageError INVALID_ARGUMENT: a folder with only pickled ``.bin`` weights.
        EmbeddingError INVALID_CONFIG: config not JSON, not an object, bad fields,
            an unknown or missing ``model_type``.
        CheckpointError MALFORMED_CHECKPOINT: a truncated or malformed weights file,
            a file that is not GGUF; MISSING_KEY: a GGUF file without its input table.
    """
    from tokembed.artifacts.safetensors_header import read_safetensors_header

    p = Path(path)
    if not p.exists():
        raise UsageError(
            "FILE_NOT_FOUND",
            f"model {p} does not exist",
            value=str(p),
            fix="pass a transformers model folder or a .gguf file",
        )
    if not p.is_dir() and not p.is_file():
        raise UsageError(
            "FILE_UNREADABLE",
            f"model {p} is a FIFO, socket or device, not a folder or a file",
            value=str(p),
            fix="pass a transformers model folder or a .gguf file",
        )
    if p.is_file():
        from tokembed.artifacts.gguf_reader import read_gguf_header

        header = read_gguf_header(p)
        if "token_embd.weight" not in header.tensors:
            raise CheckpointError(
                "MALFORMED_CHECKPOINT",
                f"{p} stores no token_embd.weight: a GGUF model without its input table",
                value=str(p),
                fix="pass the complete .gguf file",
            )
        return p
    config_file, raw = read_config_data(p)
    model_config_from_dict(raw, path=str(config_file))
    _check_model_type(raw, config_file)
    weights = sorted(p.glob("*.safetensors"))
    if not weights:
        if any(p.glob("*.bin")):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"{p} holds only pickled .bin weights; tokembed reads safetensors weights",
                value=str(p),
                fix="convert the weights to safetensors (save_pretrained(safe_serialization=True))",
            )
        raise UsageError(
            "FILE_NOT_FOUND",
            f"{p} has a config.json but no *.safetensors weights",
            value=str(p),
            fix="pass the folder that holds the model's weights",
        )
    for file in weights:
        read_safetensors_header(file)
    return p


def _check_model_type(raw: dict[str, Any], where: Path) -> None:
    from transformers import CONFIG_MAPPING

    model_type = raw.get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise EmbeddingError(
            "INVALID_CONFIG",
            f"{where}: model_type {model_type!r} is not an architecture transformers knows",
            value=model_type,
            fix='give config.json the model_type of its architecture (e.g. "llama")',
        )


def load_model(path: str | os.PathLike[str]) -> nn.Module:
    """The ``transformers`` causal LM of a folder or a ``.gguf`` file, in its stored dtype.

    A folder loads with ``dtype="auto"`` (the dtype its config declares); a GGUF
    file's tensors are dequantized, so it loads in float32. The model is in eval
    mode. :func:`check_model_source` runs first, so a malformed source is refused
    before any weight is read; a folder whose weights lack a parameter the
    architecture needs is refused rather than filled with fresh values.

    Raises:
        As :func:`check_model_source`; and CheckpointError MALFORMED_CHECKPOINT:
            ``transformers`` cannot load the source, or the weights lack parameters.
    """
    import torch
    from transformers import AutoModelForCausalLM

    path = check_model_source(path)
    loaded_with: Any
    try:
        if path.suffix == ".gguf" or path.is_file():
            loaded_with = AutoModelForCausalLM.from_pretrained(
                path.parent, gguf_file=path.name, dtype=torch.float32, output_loading_info=True
            )
        else:
            loaded_with = AutoModelForCausalLM.from_pretrained(
                path, dtype="auto", output_loading_info=True
            )
        model, info = loaded_with
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
        why = (str(exc).strip().splitlines() or [""])[0]
        raise CheckpointError(
            "MALFORMED_CHECKPOINT",
            f"transformers cannot load {path} ({type(exc).__name__}: {why[:200]})",
            value=str(path),
            fix="pass an intact transformers model folder or .gguf file",
        ) from None
    missing = list(info.get("missing_keys") or [])
    if missing:
        raise CheckpointError(
            "MALFORMED_CHECKPOINT",
            f"{path} lacks {len(missing)} parameters of its architecture ({missing[:3]}): "
            "loading would fill them with fresh values",
            value=missing[:10],
            fix="pass the folder whose weights hold every parameter",
        )
    loaded: nn.Module = model.eval()
    return loaded


def instantiate_from_config(folder: str | os.PathLike[str]) -> nn.Module:
    """The folder's architecture built from its ``config.json`` on the meta device (no weights).

    Cheap for any size: only names, shapes and the tie declarations exist. The class
    is the config's first ``architectures`` entry transformers provides; a config
    that names none gets the causal-LM head, else the base model.

    Raises:
        UsageError FILE_NOT_FOUND: no ``config.json``; FILE_UNREADABLE: the OS refused it.
        EmbeddingError INVALID_CONFIG: the config is not a JSON object.
        UsageError INVALID_ARGUMENT: transformers does not know the architecture.
    """
    import torch
    import transformers

    # The one config reader first: an unreadable or malformed file is a coded refusal,
    # never an error from inside transformers.
    path, _ = read_config_data(Path(folder))
    config = transformers.AutoConfig.from_pretrained(str(path.parent))
    names = list(getattr(config, "architectures", None) or [])
    cls: Any = next((getattr(transformers, n) for n in names if hasattr(transformers, n)), None)
    if cls is None and not names:  # a bare config: the causal-LM head, else the base model
        for auto in (transformers.AutoModelForCausalLM, transformers.AutoModel):
            if type(config) in auto._model_mapping:
                cls = auto._model_mapping[type(config)]
                break
    if cls is None:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{path} names architectures {names}, none of which transformers provides",
            value=names,
            fix="add an 'architectures' entry transformers knows (e.g. LlamaForCausalLM)",
        )
    with torch.device("meta"):
        model: nn.Module = cls(config)
    return model


def parameter_owner(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    """The module that registers the Parameter ``name``, and the attribute it is under.

    ``name`` is dotted as ``named_parameters(remove_duplicate=False)`` spells it,
    so a tied alias (``lm_head.weight``) resolves to its own module, not to the
    canonical one: assigning a new Parameter there re-points that alias only.

    Example::

        >>> from torch import nn
        >>> seq = nn.Sequential(nn.Linear(2, 2))
        >>> parameter_owner(seq, "0.weight")[1]
        'weight'

    Raises:
        UsageError INVALID_ARGUMENT: no submodule has that path, or it registers
            no Parameter under that attribute.
    """
    path, _, attr = name.rpartition(".")
    try:
        module = model.get_submodule(path) if path else model
    except AttributeError:
        module = None
    if module is None or module._parameters.get(attr) is None:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{name!r} is not a parameter of the model",
            value=name,
            fix="name parameters as model.named_parameters(remove_duplicate=False) does",
        )
    return module, attr
