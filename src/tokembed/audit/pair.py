"""Admission of a tokenizer/model pair: one check per property, each with its stable code.

A tokenizer and a model agree only if the model's rows were trained for the
tokenizer's ids. Nothing in the tensors shows a wrong pairing: every id below V
indexes some row. :func:`check_pair` therefore compares what each side states:

* ``address hash`` — the tokenizer hash a tokembed checkpoint recorded (or a module
  is bound to) equals the tokenizer's (ADDRESS_HASH_MISMATCH; skipped when none is recorded);
* ``vocab rows`` — the model allocates ``V >= R`` rows (VOCAB_BELOW_ID_RANGE); the
  detail gives ``|I|``, ``R``, ``V``, the holes below R and the rows no id reaches;
* ``gguf tokens`` — a GGUF file's own ``tokenizer.ggml.tokens`` spells every id as the
  tokenizer does (ADDRESS_HASH_MISMATCH; byte-level BPE lists only);
* ``table shape`` — the stored input table is ``[V, d_model]`` as the config says
  (SHAPE_MISMATCH); weights stored without an input table fail (MISSING_KEY);
* ``head shape`` — an untied output head stored on its own is ``[V, d_model]``
  (HEAD_VOCAB_MISMATCH, HEAD_LAYOUT_MISMATCH);
* ``bos id``, ``eos id``, ``pad id``, ``unk id`` — each id the config names is a row of
  the table (ID_OUT_OF_RANGE; PAD_ID_INVALID for PAD) and the tokenizer's token for that
  role (SPECIAL_ID_MISMATCH): its own role names when it has a ``tokenizer_config.json``
  (or ``roles=``), else one of its special tokens;
* ``tie <left> <-> <right>`` — tie claims against storage (the tie report's codes);
* ``input scale`` — who owns the input scale (sqrt(d_model) for ``scale_embedding``
  configs and Gemma, none otherwise) and, for a module, the scale its input table's
  lookup applies (DOUBLE_SCALING, SCALE_MISMATCH);
* ``dtype ledger`` — the stored table dtype reaches the declared dtype without loss,
  or is a declared block encoding (UNSAFE_CAST);
* ``table finite`` — the input table, an untied head and its bias hold no NaN or
  infinity (NON_FINITE_VALUES; reads those tensors only).

A folder with a config and no weights gives a *partial* report: its summary says which
evidence was absent instead of "all checks pass".

Example::

    >>> report = check_pair(load_tokenizer("smollm2-135m"), "path/to/SmolLM2.gguf")
    >>> report.passed, report.check("vocab rows").value
    (True, {'unique_ids': 49152, 'id_range': 49152, 'model_rows': 49152, ...})
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokembed.audit._observe import scale_convention
from tokembed.audit._source import ModelFacts, facts_of
from tokembed.audit.checks import AuditReport, Check
from tokembed.errors import EmbeddingError, MeasureError

__all__ = ["ROLES", "check_pair", "read_tokenizer_roles", "require_pair", "tie_checks"]

ROLES = ("bos", "eos", "pad", "unk")
_FLOATS = ("float64", "float32", "bfloat16", "float16")


def read_tokenizer_roles(tokenizer_path: str | os.PathLike[str]) -> dict[str, str]:
    """Role → token spelling from the ``tokenizer_config.json`` beside a tokenizer (or ``{}``).

    Reads ``bos_token``, ``eos_token``, ``pad_token`` and ``unk_token`` (a string, or
    an object with ``content``); a missing or unreadable file states no roles.
    """
    path = Path(tokenizer_path)
    folder = path if path.is_dir() else path.parent
    try:
        data = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested too deeply
        return {}
    out: dict[str, str] = {}
    for role in ROLES:
        value = data.get(f"{role}_token") if isinstance(data, dict) else None
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[role] = value
    return out


# --- the checks ---------------------------------------------------------------
def _address(tokenizer: Any, facts: ModelFacts) -> Check:
    mine = tokenizer.address_hash
    if facts.address_hash is None:
        return Check(
            name="address hash", code="ADDRESS_HASH_MISMATCH", passed=True, skipped=True,
            detail="the model records no tokenizer address hash; nothing to compare",
            value={"tokenizer": mine, "model": None},
        )  # fmt: skip
    same = facts.address_hash == mine
    return Check(
        name="address hash",
        code="ADDRESS_HASH_MISMATCH",
        passed=same,
        detail=(
            f"{facts.address_source} records {facts.address_hash[:19]}…, the tokenizer is "
            f"{mine[:19]}…" + ("" if same else ": the rows were trained for another tokenizer")
        ),
        value={"tokenizer": mine, "model": facts.address_hash},
    )


def _vocab_rows(tokenizer: Any, facts: ModelFacts) -> Check:
    from tokembed.measure.vocab_sizes import vocab_sizes_of

    sizes = vocab_sizes_of(tokenizer)  # |I|, R and the holes; V is compared here
    v = None if facts.config is None else facts.config.vocab_size
    value = {
        "unique_ids": sizes.unique_ids,
        "id_range": sizes.id_range,
        "holes": sizes.holes,
        "model_rows": v,
        "unreached_rows": None if v is None else v - sizes.unique_ids,
    }
    text = f"|I|={sizes.unique_ids:,}, R={sizes.id_range:,}, V={v if v is None else format(v, ',')}"
    if v is None:
        return Check(name="vocab rows", code="VOCAB_BELOW_ID_RANGE", passed=True, skipped=True,
                     detail=text + ": the model states no V", value=value)  # fmt: skip
    try:
        vocab_sizes_of(tokenizer, config=facts.config)
    except MeasureError as exc:
        return Check(name="vocab rows", code=exc.code, passed=False,
                     detail=f"{text}: ids {v}..{sizes.id_range - 1} have no row", value=value)  # fmt: skip
    return Check(
        name="vocab rows",
        code="VOCAB_BELOW_ID_RANGE",
        passed=True,
        detail=f"{text}; {sizes.holes:,} holes below R, {v - sizes.unique_ids:,} rows no id reaches",
        value=value,
    )


def _table_shape(facts: ModelFacts) -> Check:
    key, cfg = facts.input_key, facts.config
    info = None if key is None else facts.tensors.get(key)
    if info is None and facts.kind != "module" and facts.tensors:
        # Weights are stored but the input table is not among them: a broken model file.
        return Check(name="table shape", code="MISSING_KEY", passed=False,
                     detail=f"{facts.source} stores {len(facts.tensors)} tensors but no input "
                     "table (token_embd.weight in a GGUF file)")  # fmt: skip
    if info is None or cfg is None:
        return Check(name="table shape", code="SHAPE_MISMATCH", passed=True, skipped=True,
                     detail="no stored input table to compare with the config")  # fmt: skip
    width = cfg.embedding_size or cfg.hidden_size
    want = (cfg.vocab_size, width) if width is not None else (cfg.vocab_size, info.shape[-1])
    ok = info.shape == want
    return Check(
        name="table shape",
        code="SHAPE_MISMATCH",
        passed=ok,
        detail=f"{key} is {list(info.shape)}, the config says [V, d] = {list(want)}",
        value={"stored": list(info.shape), "config": list(want)},
    )


def _head_shape(facts: ModelFacts) -> Check:
    """An untied output head stored on its own must be [V, d]: one logit row per table row."""
    key, cfg = facts.output_key, facts.config
    info = None if key is None or key == facts.input_key else facts.tensors.get(key)
    if info is None or cfg is None:
        return Check(name="head shape", code="HEAD_VOCAB_MISMATCH", passed=True, skipped=True,
                     detail="no separately stored output head")  # fmt: skip
    table = facts.tensors.get(facts.input_key or "")
    width = cfg.hidden_size or (table.shape[-1] if table else info.shape[-1])
    value = {"stored": list(info.shape), "config": [cfg.vocab_size, width]}
    if len(info.shape) != 2 or info.shape[0] != cfg.vocab_size:
        return Check(name="head shape", code="HEAD_VOCAB_MISMATCH", passed=False, value=value,
                     detail=f"{key} is {list(info.shape)}: {cfg.vocab_size:,} rows (V) wanted, "
                     "so some ids have no logit")  # fmt: skip
    if info.shape[1] != width:
        return Check(name="head shape", code="HEAD_LAYOUT_MISMATCH", passed=False, value=value,
                     detail=f"{key} is {list(info.shape)}, the config says [V, d] = "
                     f"{[cfg.vocab_size, width]}")  # fmt: skip
    return Check(name="head shape", code="HEAD_VOCAB_MISMATCH", passed=True, value=value,
                 detail=f"{key} is {list(info.shape)} = [V, d]")  # fmt: skip


def _gguf_tokens(tokenizer: Any, facts: ModelFacts) -> Check:
    """A GGUF file carries its own token list: id i must be the tokenizer's piece for id i."""
    tokens = None if facts.header is None else facts.header.strings.get("tokenizer.ggml.tokens")
    model = None if facts.header is None else facts.header.fields.get("tokenizer.ggml.model")
    if not tokens or model != "gpt2":  # byte-level BPE spellings; other models are not compared
        return Check(name="gguf tokens", code="ADDRESS_HASH_MISMATCH", passed=True, skipped=True,
                     detail="no byte-level BPE token list in the model to compare with")  # fmt: skip
    differ = [i for i, text in enumerate(tokens) if tokenizer.id_to_token(i) != text]
    extra = tokenizer.tables.id_range - len(tokens)
    value = {"model_tokens": len(tokens), "differing_ids": differ[:10], "differing": len(differ)}
    if differ or extra > 0:
        shown = ", ".join(f"{i}: {tokens[i]!r} vs {tokenizer.id_to_token(i)!r}" for i in differ[:3])
        return Check(name="gguf tokens", code="ADDRESS_HASH_MISMATCH", passed=False, value=value,
                     detail=f"{len(differ):,} of {len(tokens):,} ids spell another token in the "
                     f"model's tokenizer.ggml.tokens ({shown})"
                     + (f"; the tokenizer has {extra:,} ids more" if extra > 0 else ""))  # fmt: skip
    return Check(name="gguf tokens", code="ADDRESS_HASH_MISMATCH", passed=True, value=value,
                 detail=f"all {len(tokens):,} ids spell the model's own tokens")  # fmt: skip


def _is_special(tokenizer: Any, i: int) -> bool:
    return i in set(tokenizer.tables.specials.values())


def _role_check(role: str, tokenizer: Any, facts: ModelFacts, stated: str | int | None) -> Check:
    name, rows = f"{role} id", None if facts.config is None else facts.config.vocab_size
    ids = () if facts.config is None else tuple(facts.config.role_ids.get(role, ()))
    tok_role = (
        stated if isinstance(stated, int) or stated is None else tokenizer.token_to_id(stated)
    )
    value = {"config": list(ids), "tokenizer": tok_role}
    if stated is not None and tok_role is None:
        return Check(
            name=name, code="SPECIAL_ID_MISMATCH", passed=False, value=value,
            detail=f"the tokenizer's config names {stated!r} as its {role} token, but its"
            " vocabulary does not define it",
        )  # fmt: skip
    if not ids and tok_role is None:
        return Check(name=name, code="SPECIAL_ID_MISMATCH", passed=True, skipped=True,
                     detail="neither side names one", value=value)  # fmt: skip
    outside = [i for i in (*ids, *([] if tok_role is None else [tok_role]))
               if i < 0 or (rows is not None and i >= rows)]  # fmt: skip
    if outside:
        return Check(
            name=name, code="PAD_ID_INVALID" if role == "pad" else "ID_OUT_OF_RANGE",
            passed=False, value=value,
            detail=f"id {outside[0]} is not a row of the table [0, {rows})",
        )  # fmt: skip
    if tok_role is not None and ids and tok_role not in ids:
        spell = tokenizer.id_to_token(tok_role)
        return Check(
            name=name, code="SPECIAL_ID_MISMATCH", passed=False, value=value,
            detail=f"the config says {list(ids)}, the tokenizer's {role} is {spell!r} = {tok_role}",
        )  # fmt: skip
    # Where the tokenizer names no token for the role, the config's id must at least be
    # one of its special tokens: an ordinary piece would collide with text.
    plain = [i for i in ids if not _is_special(tokenizer, i)]
    if tok_role is None and plain:
        spell = tokenizer.id_to_token(plain[0])
        return Check(
            name=name, code="SPECIAL_ID_MISMATCH", passed=False, value=value,
            detail=f"the config's {role} id {plain[0]} is {spell!r} in this tokenizer,"
            " an ordinary piece, not a special token",
        )  # fmt: skip
    shown = [f"{i} {tokenizer.id_to_token(i)!r}" for i in (ids or (tok_role,))]
    where = "config and tokenizer agree" if ids and tok_role is not None else (
        "stated by the config" if ids else "stated by the tokenizer only")  # fmt: skip
    return Check(name=name, code="SPECIAL_ID_MISMATCH", passed=True, value=value,
                 detail=f"{', '.join(shown)}: {where}")  # fmt: skip


def tie_checks(facts: ModelFacts) -> list[Check]:
    """One check per tied, claimed or tie-like pair of tables (the tie report's codes)."""
    pairs: tuple[Any, ...] = ()
    if facts.kind == "module":
        from tokembed.checkpoint.ties import tie_report

        pairs = tie_report(facts.module).pairs
    elif facts.kind == "folder" and facts.weights:
        from tokembed.checkpoint.folder import folder_tie_report

        pairs = folder_tie_report(facts.source).pairs
    elif facts.kind == "gguf":
        tied = facts.config.tied if facts.config else None
        once = facts.output_key is None
        return [Check(
            name="tie token_embd.weight <-> output.weight", code="TIE_NOT_SHARED", passed=True,
            detail=("stored once: the head is the input table" if once else "both stored: untied")
            + f" (tie_word_embeddings={tied})",
            value={"stored_once": once},
        )]  # fmt: skip
    if not pairs:
        claim = None if facts.config is None else facts.config.tied
        return [Check(name="tie", code="TIE_NOT_SHARED", passed=True, skipped=True,
                      detail=f"no tied or tie-like tables stored (tie_word_embeddings={claim})")]  # fmt: skip
    return [
        Check(
            name=f"tie {p.left} <-> {p.right}",
            code=p.code or ("TIE_NOT_SHARED" if p.claimed else "UNDECLARED_TIE"),
            passed=p.code is None,
            detail=f"{p.kind}, claimed {p.claimed} ({p.claim_source or 'no claim'}): {p.detail}",
            value={"kind": p.kind, "claimed": p.claimed, "shapes": [p.left_shape, p.right_shape]},
        )
        for p in pairs
    ]


def _scale(facts: ModelFacts) -> Check:
    cfg = facts.config
    width = None if cfg is None else (cfg.embedding_size or cfg.hidden_size)
    factor, owner = scale_convention(cfg, width)
    module = facts.module
    if module is not None and facts.input_key is not None:
        table = module.get_submodule(facts.input_key.rpartition(".")[0])
        lookup_config = getattr(table, "config", None)
        declared = getattr(lookup_config, "input_scale", None)
        if declared is not None:  # a tokembed table declares its own scale
            factor, owner = float(declared), f"{type(table).__name__}.input_scale"
        own = factor if owner.startswith(("embedding", type(table).__name__)) else 1.0
        return _observed_scale(table, own, factor, owner)
    return Check(
        name="input scale", code="SCALE_MISMATCH", passed=True,
        detail=f"declared x{factor:.6g}, owner: {owner} (no module to observe)",
        value={"factor": factor, "owner": owner},
    )  # fmt: skip


def _observed_scale(table: Any, own: float, factor: float, owner: str) -> Check:
    import torch

    from tokembed.embedding.guards.numerics import observe_numerics

    rows = int(table.weight.shape[0])
    ids = torch.arange(min(rows, 64)).unsqueeze(0)  # any rows: the scale is per lookup
    value = {"factor": factor, "owner": owner}
    try:
        state = observe_numerics(table, ids, input_scale=own)
    except EmbeddingError as exc:
        return Check(name="input scale", code=exc.code, passed=False, detail=exc.message,
                     value=value)  # fmt: skip
    value["applied_by_table"] = state.scale_application_count
    return Check(
        name="input scale", code="DOUBLE_SCALING", passed=True, value=value,
        detail=f"declared x{factor:.6g}, owner: {owner}; the table's lookup applies it"
        f" {state.scale_application_count} time(s)",
    )  # fmt: skip


def _dtype_ledger(facts: ModelFacts) -> Check:
    key = facts.input_key
    info = None if key is None else facts.tensors.get(key)
    declared = None if facts.config is None else facts.config.dtype
    if info is None:
        return Check(name="dtype ledger", code="UNSAFE_CAST", passed=True, skipped=True,
                     detail="no stored input table", value={"declared": declared})  # fmt: skip
    stage = "live parameter" if facts.kind == "module" else "stored"
    value = {"stored": info.dtype, "encoded": info.encoded, "declared": declared}
    if info.encoded:
        return Check(
            name="dtype ledger", code="UNSAFE_CAST", passed=True, value=value,
            detail=f"{key} stored as the {info.dtype} block encoding, dequantized on load"
            f" to {declared or 'the caller-chosen dtype'}",
        )  # fmt: skip
    if info.dtype not in _FLOATS:
        return Check(name="dtype ledger", code="UNSAFE_CAST", passed=False, value=value,
                     detail=f"{key} is {stage} as {info.dtype}, not a floating table")  # fmt: skip
    if declared is None or declared not in _FLOATS:
        return Check(name="dtype ledger", code="UNSAFE_CAST", passed=True, value=value,
                     detail=f"{key} {stage} as {info.dtype}; the config declares no dtype")  # fmt: skip
    import torch

    from tokembed.embedding.materialize import is_safe_cast

    src, dst = getattr(torch, info.dtype), getattr(torch, declared)
    # A module's live table is compared the other way: the declared checkpoint dtype
    # must reach the live storage without loss.
    ok = is_safe_cast(dst, src) if facts.kind == "module" else is_safe_cast(src, dst)
    return Check(
        name="dtype ledger", code="UNSAFE_CAST", passed=ok, value=value,
        detail=f"{key} {stage} as {info.dtype}, the config declares {declared}"
        + ("" if ok else ": the cast between them loses information"),
    )  # fmt: skip


def _vocab_tensors(facts: ModelFacts) -> list[str]:
    """The stored vocabulary-indexed tensors: the input table, an untied head, its bias."""
    keys = [facts.input_key, facts.output_key]
    if facts.output_key is not None and facts.output_key.endswith(".weight"):
        keys.append(facts.output_key.removesuffix(".weight") + ".bias")
    present = facts.tensors if facts.kind != "module" else dict(facts.module.named_parameters())
    return [k for k in dict.fromkeys(keys) if k is not None and k in present]


def _finite(facts: ModelFacts, read_values: bool) -> Check:
    keys = _vocab_tensors(facts)
    if not read_values or not keys:
        return Check(name="table finite", code="NON_FINITE_VALUES", passed=True, skipped=True,
                     detail="table values not read" if not read_values
                     else "no input table stored")  # fmt: skip
    import torch

    from tokembed.embedding.lookup_checks import check_finite

    for key in keys:
        table = facts.table_values(key)
        if table is None:
            continue
        try:
            check_finite(table, what=key)
        except EmbeddingError as exc:
            rows = table.float().reshape(table.shape[0], -1) if table.dim() else table.reshape(1, 1)
            bad = int((~torch.isfinite(rows)).any(dim=-1).sum())
            return Check(name="table finite", code=exc.code, passed=False,
                         detail=f"{exc.message}; {bad} rows hold NaN or infinity", value=bad)  # fmt: skip
    return Check(name="table finite", code="NON_FINITE_VALUES", passed=True,
                 detail=f"{', '.join(keys)}: every value finite", value=0)  # fmt: skip


def check_pair(
    tokenizer: Any,
    model_or_dir: Any,
    *,
    roles: Mapping[str, str | int] | None = None,
    read_values: bool = True,
) -> AuditReport:
    """Check whether ``tokenizer`` and ``model_or_dir`` belong together; one :class:`Check` each.

    Args:
        tokenizer: a :class:`tokembed.tokenizer.Tokenizer`, or a path/name
            ``load_tokenizer`` accepts (then its ``tokenizer_config.json`` roles are read).
        model_or_dir: a model folder (``config.json`` and optionally safetensors
            weights; only headers are read, except by ``table finite``), a ``.gguf``
            file (or a folder holding one), or an ``nn.Module``.
        roles: role → token spelling or id (``{"pad": "<|im_end|>"}``) the tokenizer
            uses; overrides what its ``tokenizer_config.json`` says.
        read_values: read the input table's values for the finiteness check.

    Returns the report; it never raises for a failing check (see :func:`require_pair`).

    Raises:
        UsageError FILE_NOT_FOUND: no such model or tokenizer.
        EmbeddingError INVALID_CONFIG: a config without a usable ``vocab_size``.
    """
    stated: dict[str, str | int] = {}
    if isinstance(tokenizer, str | os.PathLike):
        from tokembed.tokenizer.formats import load_tokenizer

        if Path(tokenizer).exists():
            stated.update(read_tokenizer_roles(tokenizer))
        tokenizer = load_tokenizer(Path(tokenizer))
    stated.update(roles or {})
    facts = facts_of(model_or_dir)
    checks = [
        _address(tokenizer, facts),
        _vocab_rows(tokenizer, facts),
        _gguf_tokens(tokenizer, facts),
        _table_shape(facts),
        _head_shape(facts),
        *(_role_check(r, tokenizer, facts, stated.get(r)) for r in ROLES),
        *tie_checks(facts),
        _scale(facts),
        _dtype_ledger(facts),
        _finite(facts, read_values),
    ]
    name = tokenizer.name or "tokenizer"
    partial = None
    if facts.kind == "folder" and not facts.weights:
        partial = "the folder stores no weights, so no table was checked"
    return AuditReport(subject=f"{name} + {facts.source}", checks=tuple(checks), partial=partial)


def require_pair(tokenizer: Any, model_or_dir: Any, **options: Any) -> AuditReport:
    """:func:`check_pair`, raising when any check fails.

    Raises:
        AuditError PAIR_NOT_ADMITTED: lists every failing check's code; ``value`` is the report.
    """
    return check_pair(tokenizer, model_or_dir, **options).require(
        "PAIR_NOT_ADMITTED",
        fix="pair the tokenizer with the model it was trained with, or migrate the vocabulary",
    )
