"""The initial-state contract before step 0, checked in one call on a real batch.

:func:`check_initial_state` runs what a training script is about to run (the
input table on the batch, and the model up to the input of its first layer)
and checks, each with its code:

* ``address hash`` — the model's bound tokenizer hash, and the batch's stamp,
  are the tokenizer's (ADDRESS_HASH_MISMATCH);
* ``ids admitted`` — the lookup contract of :mod:`tokembed.embedding.lookup_checks`:
  integer ids inside ``[0, V)``, the batch's PAD id equal to ``padding_idx``, a
  zero PAD row where the table keeps one (INDEX_DTYPE_MISMATCH, ID_OUT_OF_RANGE,
  PAD_ID_INVALID, PAD_ROW_NOT_ZERO, ...);
* ``pad id`` — the PAD id is a row of the table (PAD_ID_INVALID);
* ``mask/PAD`` — the PAD-agreement guard
  :func:`tokembed.embedding.check_pad_masks`: masked-out positions hold PAD and
  their labels are the ignore index (PAD_MASK_MISMATCH), the batch pads with the
  table's ``padding_idx`` (PAD_ID_INVALID), no attended position reads the frozen
  PAD row (PAD_ROW_AS_CONTENT);
* ``labels range`` — labels are the ignore index or rows (ID_OUT_OF_RANGE);
* ``lookup finite`` and ``first-layer input finite`` (NON_FINITE_VALUES);
* ``scale once`` — the observed factor between the first layer's input and the
  gathered rows is the declared input scale applied exactly once
  (DOUBLE_SCALING, SCALE_MISMATCH);
* ``positions once`` — declared additive positions (learned ``wpe`` /
  ``position_embeddings`` tables, fixed sinusoids) reach the first layer
  exactly once (POSITIONS_MISSING, POSITION_APPLIED_TWICE, POSITION_COUNT_MISMATCH
  for a fractional count), and none arrive where none are declared (POSITIONS_UNEXPECTED);
* ``output head`` — the head is ``[V, d]`` for the input table's V and the model's
  width (:func:`tokembed.checkpoint.check_output_head`: HEAD_LAYOUT_MISMATCH,
  HEAD_VOCAB_MISMATCH);
* ``shape ledger`` — ids, mask, labels, table, head, rows, positions and the first
  layer's input recorded with symbols bound once (LEDGER_DIMENSION_CONFLICT), and
  compared with a declared ledger when given (LEDGER_MISMATCH);
* ``tie …`` — tie claims against storage (the tie report's codes).

The first layer's input is observed with a forward pre-hook that stops the
forward there, so the rest of the model never runs. For a transformers model the
first layer is the first block of its layer list; an embedding module (a
TokenEmbedding, ScaledSinusoidalEmbedding, nn.Embedding) is its own input path; any other
module needs ``first_layer=``. The scale and position counts come from a
least-squares fit ``X0 ≈ a·E[ids] + b·P`` in float64; models that normalize
before the first layer (BERT's embedding LayerNorm) or whose output is not rows
of the table (a factorized bridge) skip those two checks and say so.

Failing checks raise one :class:`~tokembed.errors.AuditError`
(INITIAL_STATE_REJECTED) that lists them all; its ``value`` is the report. A
passing call returns the report, ledger included.

Example::

    >>> report = check_initial_state(model, tokenizer, {"input_ids": ids, "attention_mask": mask})
    >>> report.ledger.dims
    {'V': 50257, 'd_model': 64, 'B': 2, 'L': 9}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tokembed.audit._observe import InputPath, input_path, model_eval, observed
from tokembed.audit._source import ModelFacts, facts_of
from tokembed.audit.checks import AuditReport, Check
from tokembed.audit.pair import tie_checks
from tokembed.audit.shapes import ShapeLedger
from tokembed.embedding.addressed import AddressedIds
from tokembed.errors import AuditError, CheckpointError, EmbeddingError

__all__ = ["check_initial_state"]

_IGNORE = -100  # the ignore_index of torch's cross_entropy and of transformers' labels


@dataclass(frozen=True, kw_only=True)
class _Batch:
    ids: torch.Tensor
    stamped: AddressedIds | None
    mask: torch.Tensor | None
    labels: torch.Tensor | None
    pad_id: int | None


def _batch(batch: Any, pad_id: int | None) -> _Batch:
    if isinstance(batch, Mapping):
        ids, mask, labels = batch["input_ids"], batch.get("attention_mask"), batch.get("labels")
    else:
        ids, mask, labels = batch, None, None
    stamped = ids if isinstance(ids, AddressedIds) else None
    raw = ids.ids if stamped is not None else ids
    if mask is None and stamped is not None and stamped.pad_id is not None:
        mask = stamped.attention_mask()
    return _Batch(ids=raw, stamped=stamped, mask=mask, labels=labels, pad_id=pad_id)


# --- the checks -----------------------------------------------------------------
def _address(tokenizer: Any, facts: ModelFacts, b: _Batch) -> Check:
    mine = tokenizer.address_hash
    seen = {
        "model": facts.address_hash,
        "batch": None if b.stamped is None else b.stamped.address_hash,
    }
    other = {k: v for k, v in seen.items() if v is not None and v != mine}
    if not any(seen.values()):
        return Check(name="address hash", code="ADDRESS_HASH_MISMATCH", passed=True, skipped=True,
                     detail="neither the model nor the batch records a tokenizer hash")  # fmt: skip
    detail = ", ".join(f"the {k} is bound to {v[:19]}…" for k, v in other.items())
    return Check(
        name="address hash", code="ADDRESS_HASH_MISMATCH", passed=not other,
        detail=(detail + f"; the tokenizer is {mine[:19]}…") if other else "model and batch agree",
        value={"tokenizer": mine, **seen},
    )  # fmt: skip


def _admitted(path: InputPath, b: _Batch) -> Check:
    from tokembed.embedding.lookup_checks import admit_lookup_ids
    from tokembed.embedding.lookup_config import config_of

    config = config_of(path.table)
    pad = None if config.padding_idx is None else path.weight[config.padding_idx]
    try:
        admit_lookup_ids(b.stamped or b.ids, config, device=path.weight.device, pad_row=pad)
    except EmbeddingError as exc:
        return Check(name="ids admitted", code=exc.code, passed=False, detail=exc.message,
                     value=exc.value)  # fmt: skip
    return Check(name="ids admitted", code="ID_OUT_OF_RANGE", passed=True,
                 detail=f"{b.ids.dtype} ids inside [0, {config.num_embeddings})")  # fmt: skip


def _pad_id(facts: ModelFacts, path: InputPath, b: _Batch) -> int | None:
    if b.stamped is not None and b.stamped.pad_id is not None:
        return b.stamped.pad_id
    if b.pad_id is not None:
        return b.pad_id
    stated = () if facts.config is None else facts.config.role_ids.get("pad", ())
    if stated:
        return stated[0]
    pad = getattr(path.table, "padding_idx", None)
    return None if pad is None else int(pad)


def _pad_checks(facts: ModelFacts, path: InputPath, b: _Batch, v: int) -> list[Check]:
    from tokembed.embedding.guards.pad_masks import check_pad_masks

    pad = _pad_id(facts, path, b)
    if pad is None:
        stated = Check(name="pad id", code="PAD_ID_INVALID", passed=True, skipped=True,
                       detail="no PAD id stated (batch, pad_id=, config or padding_idx)")  # fmt: skip
    else:
        ok = 0 <= pad < v
        stated = Check(name="pad id", code="PAD_ID_INVALID", passed=ok, value=pad,
                       detail=f"PAD id {pad} " + ("is a row" if ok else f"is outside [0, {v})"))  # fmt: skip
    if b.mask is None or pad is None:
        why = "no attention mask" if b.mask is None else "no PAD id to compare"
        return [stated, Check(name="mask/PAD", code="PAD_MASK_MISMATCH", passed=True,
                              skipped=True, detail=why)]  # fmt: skip
    padding_idx = getattr(path.table, "padding_idx", None)
    try:  # the PAD-agreement guard: PAD id, padding_idx, attention mask and labels
        check_pad_masks(b.ids, pad_id=pad, padding_idx=padding_idx, attention_mask=b.mask,
                        labels=b.labels, ignore_index=_IGNORE)  # fmt: skip
    except EmbeddingError as exc:
        return [stated, Check(name="mask/PAD", code=exc.code, passed=False, detail=exc.message,
                              value=exc.value)]  # fmt: skip
    hidden = int((~b.mask.bool()).sum())
    labels = "" if b.labels is None else ", labels ignored there"
    return [stated, Check(name="mask/PAD", code="PAD_MASK_MISMATCH", passed=True, value=hidden,
                          detail=f"{hidden} masked positions, all PAD {pad}{labels};"
                          f" padding_idx = {padding_idx}")]  # fmt: skip


def _label_checks(b: _Batch, v: int) -> list[Check]:
    if b.labels is None:
        return [Check(name="labels range", code="ID_OUT_OF_RANGE", passed=True, skipped=True,
                      detail="no labels in the batch")]  # fmt: skip
    labels = b.labels
    wrong = labels.ne(_IGNORE) & (labels.lt(0) | labels.ge(v))
    n = int(wrong.sum())
    return [Check(name="labels range", code="ID_OUT_OF_RANGE", passed=n == 0, value=n,
                  detail=f"labels are -100 or rows of [0, {v})" if n == 0
                  else f"{n} labels are neither -100 nor a row of [0, {v})")]  # fmt: skip


def _head(facts: ModelFacts, path: InputPath) -> Check:
    from tokembed.checkpoint.heads import check_output_head

    if facts.output_key is None or facts.module is None:
        return Check(name="output head", code="HEAD_LAYOUT_MISMATCH", passed=True, skipped=True,
                     detail="no output head")  # fmt: skip
    head = facts.module.get_parameter(facts.output_key)
    cfg = facts.config
    try:
        check_output_head(path.weight, head, hidden_size=None if cfg is None else cfg.hidden_size)
    except CheckpointError as exc:
        return Check(name="output head", code=exc.code, passed=False, detail=exc.message,
                     value=exc.value)  # fmt: skip
    return Check(name="output head", code="HEAD_LAYOUT_MISMATCH", passed=True,
                 detail=f"{facts.output_key} is [V, d] = {list(head.shape)}")  # fmt: skip


def _finite(t: torch.Tensor, name: str, what: str) -> Check:
    from tokembed.embedding.lookup_checks import check_finite

    try:
        check_finite(t, what=what)
    except EmbeddingError as exc:
        flat = t.reshape(-1, t.shape[-1]) if t.dim() else t.reshape(1, 1)
        bad = int((~torch.isfinite(flat)).any(dim=-1).sum())
        return Check(name=name, code=exc.code, passed=False, value=bad,
                     detail=f"{what}: {bad} positions hold NaN or infinity")  # fmt: skip
    return Check(name=name, code="NON_FINITE_VALUES", passed=True, detail=f"{what}: all finite")


def _ledger(
    facts: ModelFacts, path: InputPath, b: _Batch, rows: torch.Tensor | None,
    x0: torch.Tensor | None, declared: ShapeLedger | None, *, head: bool,
) -> tuple[ShapeLedger, list[Check]]:  # fmt: skip
    ledger = ShapeLedger()
    cfg = facts.config
    width = "d_embed" if cfg is not None and cfg.embedding_size else "d_model"
    entries: list[tuple[str, Any, tuple[str, ...]]] = [
        ("table", path.weight, ("V", width)),
        ("ids", b.ids, ("B", "L")),
    ]
    if b.mask is not None:
        entries.append(("attention_mask", b.mask, ("B", "L")))
    if b.labels is not None:
        entries.append(("labels", b.labels, ("B", "L")))
    if head and facts.output_key is not None and facts.module is not None:
        # a head the head check refused is reported there, not twice
        entries.append(("head", facts.module.get_parameter(facts.output_key), ("V", "d_model")))
    if rows is not None:
        entries.append(("rows", rows, ("B", "L", width)))
    if path.positions is not None:
        entries.append(("positions", path.positions[: b.ids.shape[-1]], ("L", "d_model")))
    if x0 is not None:
        entries.append(("x0", x0, ("B", "L", "d_model")))
    check = Check(name="shape ledger", code="LEDGER_DIMENSION_CONFLICT", passed=True,
                  detail="")  # fmt: skip
    try:
        if cfg is not None:
            ledger.bind(V=cfg.vocab_size, **({} if cfg.hidden_size is None else
                                              {"d_model": cfg.hidden_size}))  # fmt: skip
        for name, t, dims in entries:
            ledger.record(name, t, dims)
    except AuditError as exc:
        check = Check(name="shape ledger", code=exc.code, passed=False, detail=exc.message,
                      value=exc.value)  # fmt: skip
    if check.passed:
        shown = ", ".join(f"{k}={v}" for k, v in ledger.dims.items())
        check = Check(name="shape ledger", code="LEDGER_DIMENSION_CONFLICT", passed=True,
                      detail=f"{len(ledger.entries)} entries; {shown}", value=ledger.dims)  # fmt: skip
    checks = [check]
    if declared is not None:
        diff = ledger.compare(declared)
        checks.append(Check(
            name="ledger vs declared", code="LEDGER_MISMATCH", passed=diff is None,
            detail="the model's ledger matches the declared one" if diff is None
            else f"first disagreement: {diff.detail}",
            value=None if diff is None else (diff.name, diff.kind),
        ))  # fmt: skip
    return ledger, checks


def check_initial_state(
    model: nn.Module,
    tokenizer: Any,
    batch: Any,
    *,
    first_layer: nn.Module | None = None,
    declared_ledger: ShapeLedger | None = None,
    pad_id: int | None = None,
) -> AuditReport:
    """Check the initial state a training step would start from; see the module docstring.

    Args:
        model: a transformers model, a tokembed embedding module, or any module whose
            first layer is named by ``first_layer``.
        tokenizer: the tokenizer that produced the batch (its ``address_hash`` is compared).
        batch: ``{"input_ids": ids, "attention_mask": ..., "labels": ...}`` (ids may be
            :class:`~tokembed.embedding.AddressedIds`), or the ids alone.
        first_layer: the module whose input is the model's initial state X0.
        declared_ledger: a ledger the model's must equal (see :mod:`tokembed.audit.shapes`).
        pad_id: the PAD id the batch was padded with, when neither the batch (an
            ``AddressedIds``), the config (``pad_token_id``) nor the table states it.

    The model runs in eval mode under ``no_grad`` (its modes are restored), up to
    the first layer only. Returns the report when every check passes.

    Raises:
        AuditError INITIAL_STATE_REJECTED: one or more checks fail; the message lists
            each failing code and ``value`` is the :class:`AuditReport`.
    """
    facts = facts_of(model)
    if facts.input_key is None:
        raise AuditError(
            "INITIAL_STATE_REJECTED",
            f"{type(model).__name__} has no input table (no get_input_embeddings, no embedding)",
            value=type(model).__name__,
            fix="pass the model whose input table the batch is looked up in",
        )
    b = _batch(batch, pad_id)
    path = input_path(model, facts, first_layer)
    v = int(path.weight.shape[0])
    checks = [_address(tokenizer, facts, b)]
    admitted = _admitted(path, b)
    checks += [admitted, *_pad_checks(facts, path, b, v), *_label_checks(b, v)]
    rows = x0 = None
    with torch.no_grad(), model_eval(model):
        if admitted.passed:
            rows = F.embedding(b.ids, path.weight)
            checks.append(_finite(rows, "lookup finite", "the gathered rows"))
            if path.run is not None:
                try:
                    x0 = path.run(b.ids, b.mask)
                except EmbeddingError as exc:  # a guard on the model's own input path fired
                    checks.append(Check(name="input path", code=exc.code, passed=False,
                                        detail=exc.message, value=exc.value))  # fmt: skip
        if x0 is not None:
            checks.append(_finite(x0, "first-layer input finite", "the first layer's input"))
        checks += observed(path, x0, rows, b.ids, finite=all(
            c.passed for c in checks if c.code == "NON_FINITE_VALUES"))  # fmt: skip
    head = _head(facts, path)
    checks.append(head)
    ledger, ledger_checks = _ledger(facts, path, b, rows, x0, declared_ledger, head=head.passed)
    checks += ledger_checks
    checks += tie_checks(facts)
    name = getattr(tokenizer, "name", None) or "tokenizer"
    report = AuditReport(subject=f"{name} + {facts.source}", checks=tuple(checks), ledger=ledger)
    return report.require(
        "INITIAL_STATE_REJECTED",
        fix="fix each failing check before step 0 (the codes name the guard that explains it)",
    )
