"""Hugging Face interop: tie claims of a transformers model, and its weights file.

A ``PreTrainedModel`` states its ties twice: the class's ``_tied_weights_keys``
(``{target: source}``, e.g. ``{"lm_head.weight": "model.embed_tokens.weight"}``)
names the pairs that *can* be tied, and ``config.tie_word_embeddings`` says
whether they *are*. transformers re-ties by that config on ``from_pretrained``,
so a weights file that disagrees with its config is hidden once loaded; these
helpers read the claim so it can be checked against the storage. transformers
is imported only inside functions.

Example::

    >>> hf_claims(LlamaForCausalLM(LlamaConfig(tie_word_embeddings=True, ...)))
    {('lm_head.weight', 'model.embed_tokens.weight'): True}
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from torch import nn

from tokembed.errors import UsageError

__all__ = ["find_weights", "hf_claims"]

_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_.]+$")


def _configs_tie(model: nn.Module) -> bool | None:
    config = getattr(model, "config", None)
    if config is None:
        return None
    text = getattr(config, "get_text_config", None)
    value = getattr(config, "tie_word_embeddings", None)
    if value is None and callable(text):
        value = getattr(text(), "tie_word_embeddings", None)
    return None if value is None else bool(value)


def hf_claims(model: nn.Module) -> dict[tuple[str, str], bool]:
    """``{(alias, canonical): claimed}`` from a transformers model's tied-keys and config.

    ``claimed`` is True for pairs the config ties and False for pairs the class
    could tie but the config says not to. A model that is not a transformers
    model, or declares no tied keys, gives ``{}``.
    """
    declared = getattr(model, "_tied_weights_keys", None)
    ties = _configs_tie(model)
    if not declared or ties is None:
        return {}
    expand = getattr(model, "get_expanded_tied_weights_keys", None)
    if ties and callable(expand):
        return {(alias, src): True for alias, src in expand(all_submodels=True).items()}
    pairs: list[tuple[str, str]]
    if isinstance(declared, dict):
        pairs = list(declared.items())
    else:  # transformers 4.x: a list of target names, tied to the input embeddings
        inputs = _input_embedding_name(model)
        pairs = [(name, inputs) for name in declared if inputs]
    names = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    # An untied config denies only the word-embedding tie; other declared pairs (e.g. a
    # decoder bias aliased inside the head) stay structural and carry no claim.
    roles = {_input_embedding_name(model), _module_weight(model, "get_output_embeddings")}
    return {
        (alias, src): ties
        for alias, src in pairs
        if _PLAIN_NAME.match(alias) and alias in names and src in names and {alias, src} & roles
    }


def _module_weight(model: nn.Module, getter: str) -> str | None:
    get = getattr(model, getter, None)
    module = get() if callable(get) else None
    for name, m in model.named_modules():
        if m is module:
            return f"{name}.weight"
    return None


def _input_embedding_name(model: nn.Module) -> str | None:
    return _module_weight(model, "get_input_embeddings")


def find_weights(folder: str | os.PathLike[str]) -> Path:
    """The weights file of a model folder: ``model.safetensors`` (or the one ``*.safetensors``).

    Raises:
        UsageError FILE_NOT_FOUND: no such folder or no single safetensors file in it.
    """
    path = Path(folder)
    if path.is_file():
        return path
    candidates = [path / "model.safetensors"] if (path / "model.safetensors").is_file() else []
    candidates = candidates or sorted(path.glob("*.safetensors")) if path.is_dir() else []
    if len(candidates) != 1:
        raise UsageError(
            "FILE_NOT_FOUND",
            f"{path} holds {len(candidates)} safetensors weight files, expected one",
            value=str(path),
            fix="pass a model folder with model.safetensors (sharded folders: one file at a time)",
        )
    return candidates[0]
