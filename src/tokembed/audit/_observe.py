"""The input path of a model up to its first layer, observed (private to the audits).

:func:`input_path` finds the input table, the input scale the model declares
(:func:`scale_convention`), the additive position table it declares, and a way to
run the model up to its first layer: a forward pre-hook captures that layer's
input X0 and stops the forward, so no layer runs. :func:`observed` fits
``X0 ≈ a·E[ids] + b·P[:L]`` in float64 and turns ``a`` and ``b`` into the
``scale once`` and ``positions once`` checks.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tokembed.audit._source import ModelFacts
from tokembed.audit.checks import Check
from tokembed.errors import EmbeddingError

__all__ = ["InputPath", "input_path", "model_eval", "observed", "scale_convention"]

_POSITION_NAMES = ("wpe", "position_embeddings")


class _Reached(Exception):
    """Raised by the pre-hook to stop the forward at the first layer."""


@dataclass(frozen=True, kw_only=True)
class InputPath:
    """The input table, its declared scale and owner, declared positions, and how to reach X0."""

    table: nn.Module
    weight: torch.Tensor
    factor: float
    owner: str
    positions: torch.Tensor | None  # the declared additive table, [max_len, d]
    run: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor] | None
    why_not: str | None  # why X0 cannot be fitted, when it cannot


@contextlib.contextmanager
def model_eval(model: nn.Module) -> Iterator[None]:
    """``model`` in eval mode for the block; every submodule's own mode is restored after."""
    modes = {m: m.training for m in model.modules()}
    model.eval()  # dropout off: X0 must be a deterministic function of the rows
    try:
        yield
    finally:
        for m, mode in modes.items():
            m.train(mode)


def _first_layer(model: nn.Module) -> nn.Module | None:
    config = getattr(model, "config", None)
    text = (
        config.get_text_config()
        if config is not None and hasattr(config, "get_text_config")
        else config
    )
    layers = getattr(text, "num_hidden_layers", None)
    for m in model.modules():
        if isinstance(m, nn.ModuleList) and layers and len(m) == layers:
            return m[0]
    return None


def _hooked(model: nn.Module, layer: nn.Module) -> Callable[..., torch.Tensor]:
    def run(ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        seen: list[torch.Tensor] = []

        def grab(_: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            seen.append(args[0] if args else kwargs["hidden_states"])
            raise _Reached

        handle = layer.register_forward_pre_hook(grab, with_kwargs=True)
        try:
            if hasattr(model, "get_input_embeddings") and hasattr(model, "config"):
                model(input_ids=ids, attention_mask=mask)
            else:
                model(ids)
        except _Reached:
            pass
        finally:
            handle.remove()
        if not seen:
            raise AssertionError("the first layer was never reached")  # our invariant
        return seen[0]

    return run


def input_path(model: nn.Module, facts: ModelFacts, first_layer: nn.Module | None) -> InputPath:
    """How ``model`` turns ids into X0: its table, declared scale and positions, and a runner.

    ``first_layer`` overrides the first block found in a transformers model's layer list.
    """
    from tokembed.embedding.variants.sinusoidal import ScaledSinusoidalEmbedding

    assert facts.input_key is not None
    table = model.get_submodule(facts.input_key.rpartition(".")[0])
    weight: torch.Tensor = table.weight  # type: ignore[assignment]
    cfg = facts.config
    width = None if cfg is None else (cfg.embedding_size or cfg.hidden_size)
    factor, owner = scale_convention(cfg, width)
    own = getattr(getattr(table, "config", None), "input_scale", None)
    if own is not None:
        factor, owner = float(own), f"{type(table).__name__}.input_scale"
    positions = None
    for name, m in model.named_modules():
        if isinstance(m, ScaledSinusoidalEmbedding):
            positions = m.get_buffer("pe")
        elif type(m) is nn.Embedding and name.rpartition(".")[2] in _POSITION_NAMES:
            positions = m.weight
    why = None
    if any("emb" in n.lower() and "norm" in n.lower() for n, _ in model.named_modules()):
        why = "the model normalizes its input rows before the first layer"
    layer = first_layer if first_layer is not None else _first_layer(model)
    run: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor] | None = None
    if layer is not None:
        run = _hooked(model, layer)
    elif table is model or isinstance(model, ScaledSinusoidalEmbedding | nn.Embedding):
        run = lambda ids, mask: model(ids)  # noqa: E731 (the model is its own input path)
    else:
        why = why or "no first layer found: pass first_layer= (the module whose input is X0)"
    return InputPath(table=table, weight=weight, factor=factor, owner=owner,
                      positions=positions, run=run, why_not=why)  # fmt: skip


def scale_convention(config: Any, width: int | None) -> tuple[float, str]:
    """``(factor, owner)`` of the input scale a config declares.

    ``scale_embedding: true`` (BART, Marian, M2M-100) and Gemma's models scale by
    sqrt(d_model) inside their input table module (transformers' scaled word
    embeddings); everything else applies no input scale (factor 1.0, owner ``"none"``).
    """
    d = width or 1
    if config is not None and config.scale_embedding:
        return math.sqrt(d), "embedding module (scale_embedding)"
    if config is not None and (config.model_type or "").startswith("gemma"):
        return math.sqrt(d), "embedding module (Gemma)"
    return 1.0, "none"


def _fit(x0: torch.Tensor, rows: torch.Tensor, pos: torch.Tensor | None) -> tuple[float, float]:
    """Least-squares ``(a, b)`` of ``x0 ≈ a·rows + b·pos`` in float64 (b = 0 without ``pos``)."""
    x, c = x0.detach().double().reshape(-1), rows.detach().double().reshape(-1)
    if pos is None:
        cc = float(c @ c)
        return (float(x @ c) / cc if cc else 0.0), 0.0
    p = pos.detach().double().expand_as(rows).reshape(-1)
    gram = torch.tensor([[c @ c, c @ p], [c @ p, p @ p]], dtype=torch.float64)
    rhs = torch.stack([x @ c, x @ p])
    a, b = torch.linalg.lstsq(gram, rhs.unsqueeze(1)).solution.reshape(-1).tolist()
    return float(a), float(b)


def _tolerance(dtype: torch.dtype, terms: int) -> float:
    # A ratio of sums over `terms` products rounds by about terms * eps relative.
    return min(0.25, 8 * terms * torch.finfo(dtype).eps) if dtype.is_floating_point else 0.0


def _scale_and_positions(
    path: InputPath, x0: torch.Tensor, rows: torch.Tensor, ids: torch.Tensor
) -> list[Check]:
    from tokembed.embedding.guards.numerics import observe_numerics

    length = ids.shape[-1]
    pos = None if path.positions is None else path.positions[:length]
    a, b = _fit(x0, rows, pos)
    counted = 0 if pos is None else round(b)
    rest = x0.detach().double() - (0.0 if pos is None else counted * pos.detach().double())
    value = {"factor": path.factor, "owner": path.owner, "fit_scale": a, "fit_positions": b}
    try:
        state = observe_numerics(
            path.table, ids, forward=lambda _ids: rest, input_scale=path.factor
        )
        detail = (
            "no input scale declared and none observed" if path.factor == 1.0
            else f"x{path.factor:.6g} (owner: {path.owner}) applied"
            f" {state.scale_application_count} time(s)"
        )  # fmt: skip
        scale = Check(name="scale once", code="DOUBLE_SCALING", passed=True, value=value,
                      detail=detail)  # fmt: skip
    except EmbeddingError as exc:
        scale = Check(name="scale once", code=exc.code, passed=False, detail=exc.message,
                      value=value)  # fmt: skip
    tol = _tolerance(x0.dtype, x0.shape[-1])
    if pos is None:
        resid = rest - a * rows.detach().double()
        ratio = float(resid.norm() / max(float(rest.norm()), 1e-300))
        ok = ratio <= tol or not scale.passed  # a wrong scale already explains the residual
        positions = Check(
            name="positions once", code="POSITIONS_UNEXPECTED", passed=ok,
            value={"declared": None, "residual": ratio},
            detail="no additive positions declared and none arrive" if ok
            else f"the first layer's input holds an additive term (relative size {ratio:.3g})"
            " the model declares no positions for",
        )  # fmt: skip
    else:
        integral = abs(b - counted) <= tol * max(1.0, abs(b))
        code = {0: "POSITIONS_MISSING", 1: "POSITIONS_MISSING", 2: "POSITION_APPLIED_TWICE"}.get(
            counted if integral else -1, "POSITION_COUNT_MISMATCH")  # fmt: skip
        positions = Check(
            name="positions once", code=code, passed=integral and counted == 1,
            value={"declared": 1, "observed": b},
            detail=f"declared positions reach the first layer {b:.6g} time(s)",
        )  # fmt: skip
    return [scale, positions]


def observed(
    path: InputPath, x0: torch.Tensor | None, rows: torch.Tensor | None, ids: torch.Tensor,
    *, finite: bool,
) -> list[Check]:  # fmt: skip
    """The scale and position checks, or the two of them skipped with the reason."""
    why = path.why_not or (
        "the ids were not admitted" if rows is None
        else "no first-layer input observed" if x0 is None
        else f"the first layer's input {list(x0.shape)} is not rows of the table"
        if x0.shape != rows.shape
        else "non-finite values carry no scale evidence" if not finite
        else None
    )  # fmt: skip
    if why is None:
        assert x0 is not None
        assert rows is not None
        return _scale_and_positions(path, x0, rows, ids)
    return [
        Check(name="scale once", code="DOUBLE_SCALING", passed=True, skipped=True, detail=why),
        Check(name="positions once", code="POSITION_COUNT_MISMATCH", passed=True, skipped=True,
              detail=why),
    ]  # fmt: skip
