"""Tie report of a model folder on disk: what the config claims against what the file stores.

``from_pretrained`` re-ties by config, so a loaded model cannot show that its
weights file disagreed with its config. :func:`folder_tie_report` looks at the
folder itself: the architecture is built on the meta device (names and tie
declarations, no memory), the claims come from its config, and for each
claimed or structural pair the safetensors file is read:

* one key stored, the other absent — ``stored_once``: the file relies on the
  alias (fine when the config claims the tie; UNDECLARED_TIE when it denies it,
  since the absent role would load freshly initialized);
* both keys stored — compared bit for bit: equal values are a tie stored twice,
  different values under a claimed tie are DIVERGENT_ALIAS_VALUES;
* a tokembed checkpoint's recorded alias map counts as stored once.

Example::

    >>> print(folder_tie_report("models/smollm2").format())
    model.embed_tokens.weight <-> lm_head.weight: stored_once, claimed tied ...: ok — ...
"""

from __future__ import annotations

import os

import torch

from tokembed.checkpoint._hf import find_weights, hf_claims, instantiate_from_config
from tokembed.checkpoint.alias import alias_graph
from tokembed.checkpoint.format import read_metadata
from tokembed.checkpoint.ties import TieKind, TiePair, TieReport

__all__ = ["folder_tie_report"]


def folder_tie_report(folder: str | os.PathLike[str]) -> TieReport:
    """Check a transformers model folder's weights file against its config's tie claims.

    Raises:
        UsageError FILE_NOT_FOUND: no ``config.json`` or no single safetensors file.
        UsageError INVALID_ARGUMENT: transformers does not know the architecture.
    """
    from safetensors import safe_open

    model = instantiate_from_config(folder)
    weights = find_weights(folder)
    recorded = (read_metadata(weights) or {}).get("aliases", {})
    pairs: dict[frozenset[str], tuple[str, str, bool | None, str]] = {}
    for (alias, source), hf_tied in hf_claims(model).items():
        pairs[frozenset((alias, source))] = (source, alias, hf_tied, "config.tie_word_embeddings")
    for group in alias_graph(model).groups:
        for alias in group[1:]:
            pairs.setdefault(frozenset((group[0], alias)), (group[0], alias, None, "architecture"))
    result = []
    with safe_open(str(weights), "pt", device="cpu") as f:
        keys = set(f.keys())
        for left, right, claimed, source in pairs.values():
            result.append(_pair(f, keys, recorded, left, right, claimed, source))
    return TieReport(pairs=tuple(result))


def _pair(
    f: object,
    keys: set[str],
    recorded: dict[str, str],
    left: str,
    right: str,
    claimed: bool | None,
    source: str,
) -> TiePair:
    get = f.get_tensor  # type: ignore[attr-defined]
    stored = [n for n in (left, right) if n in keys]
    shapes = [tuple(get(n).shape) if n in keys else () for n in (left, right)]
    kind: TieKind = "stored_once"
    code: str | None = None
    equal: bool | None = None
    if len(stored) == 2:
        a, b = get(left), get(right)
        equal = a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
        kind = "equal_values" if equal else "distinct"
        detail = "both keys stored, equal values" if equal else "both keys stored, values differ"
        if claimed and not equal:
            code = "DIVERGENT_ALIAS_VALUES"
    elif len(stored) == 1:
        shapes = [shapes[0] or shapes[1]] * 2
        via = "recorded alias map" if recorded.get(right) == left else "one key"
        detail = f"stored once ({stored[0]}, {via})"
        if claimed is False:
            code = "UNDECLARED_TIE"
            detail += ": the config unties the pair, so the absent role would load fresh values"
    else:
        kind, detail = "distinct", "neither key is stored"
    return TiePair(
        left=left,
        right=right,
        kind=kind,
        left_shape=shapes[0],
        right_shape=shapes[1],
        same_object=len(stored) == 1,
        same_storage=len(stored) == 1,
        equal_values=equal,
        claimed=claimed,
        claim_source=source,
        code=code,
        detail=detail,
    )
