"""A transformers model from its files: loaded with its weights, or built empty from its config.

Two ways the project turns a model on disk into a module, both through
``transformers`` (imported when called, as is torch):

* :func:`load_model` — the causal language model of a folder (``config.json``
  and safetensors weights) or of a ``.gguf`` file (read through the ``gguf``
  package and dequantized to float32), in its stored dtype, in eval mode. The
  migration command and the token audit both read models with it, so a model
  that one of them accepts the other accepts too.
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

from tokembed.artifacts.config import config_path
from tokembed.errors import UsageError

if TYPE_CHECKING:
    from torch import nn

__all__ = ["instantiate_from_config", "load_model", "parameter_owner"]


def load_model(path: str | os.PathLike[str]) -> nn.Module:
    """The ``transformers`` causal LM of a folder or a ``.gguf`` file, in its stored dtype.

    A folder loads with ``dtype="auto"`` (the dtype its config declares); a GGUF
    file's tensors are dequantized, so it loads in float32. The model is in eval mode.

    Raises:
        UsageError FILE_NOT_FOUND: ``path`` does not exist.
        Whatever ``transformers`` raises for a folder or file it cannot read
        (``OSError``, ``ValueError``, ``KeyError``): callers that face users turn
        those into their own codes.
    """
    import torch
    from transformers import AutoModelForCausalLM

    path = Path(path)
    if not path.exists():
        raise UsageError(
            "FILE_NOT_FOUND",
            f"model {path} does not exist",
            value=str(path),
            fix="pass a transformers model folder or a .gguf file",
        )
    if path.suffix == ".gguf":
        model = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype="auto")
    loaded: nn.Module = model.eval()
    return loaded


def instantiate_from_config(folder: str | os.PathLike[str]) -> nn.Module:
    """The folder's architecture built from its ``config.json`` on the meta device (no weights).

    Cheap for any size: only names, shapes and the tie declarations exist. The class
    is the config's first ``architectures`` entry transformers provides; a config
    that names none gets the causal-LM head, else the base model.

    Raises:
        UsageError FILE_NOT_FOUND: no ``config.json``.
        UsageError INVALID_ARGUMENT: transformers does not know the architecture.
    """
    import torch
    import transformers

    path = config_path(Path(folder))
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
