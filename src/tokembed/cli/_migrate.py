"""Subcommand `migrate`: move a model to a new tokenizer (tables, head, bias, ties) with a manifest."""

from __future__ import annotations

import argparse
from typing import Any

from tokembed.cli._common import add_quiet, finite_float

__all__ = ["register"]


def _add_migrate(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "migrate",
        help="migrate a model's vocabulary tables to a new tokenizer",
        description="Classify the change from OLD to NEW tokenizer, copy every preserved row "
        "exactly through the row map, initialize the new rows, restore ties, and write the "
        "migrated model, a release manifest and a report into a new folder.",
    )
    p.add_argument("model", help="transformers model folder, or a .gguf file")
    p.add_argument("--old", required=True, help="tokenizer the model was trained with (any format)")
    p.add_argument("--new", required=True, help="tokenizer to migrate to (any format)")
    p.add_argument("-o", "--output", required=True, help="new folder for the migrated model")
    p.add_argument(
        "--init",
        default="mean",
        choices=("mean", "mean_cov", "zeros", "constructor", "decomposition"),
        help="initializer of new rows (default: mean)",
    )
    p.add_argument(
        "--bias", default="mean", choices=("mean", "zeros", "prior"), help="new bias entries"
    )
    p.add_argument(
        "--bias-value", type=finite_float, default=0.0, help="value for --bias prior (finite)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of random initializers")
    p.add_argument(
        "--accept-overlap",
        action="store_true",
        help="reuse equal pieces as exact rows although the pre-tokenizer changed",
    )
    p.add_argument(
        "--accept-removal",
        action="store_true",
        help="allow a change that drops trained rows (a removal or mixed change)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(p)
    p.set_defaults(handler=_run_migrate)


def _run_migrate(args: argparse.Namespace) -> int:
    import json
    import shutil
    from pathlib import Path

    from tokembed.artifacts.models import check_model_source, load_model
    from tokembed.artifacts.recorded_hash import folder_address_hash
    from tokembed.checkpoint.folder import save_model_folder
    from tokembed.embedding.init import Initializer
    from tokembed.errors import CheckpointError, UsageError
    from tokembed.files.atomic import check_output
    from tokembed.migrate import NewRows, classify_change, decompositions, migrate_model, row_map
    from tokembed.migrate.release import build_manifest, model_digest, model_tensors
    from tokembed.migrate.roles import parameter, vocab_roles
    from tokembed.tokenizer.formats import load_tokenizer, save_tokenizer

    # Everything that can be refused is refused before the model loads (seconds to
    # minutes): the output, the model's files, the tokenizers and the kind of change.
    inputs = [args.old, args.new, args.model]
    out = Path(args.output)
    check_output(out, inputs=inputs)
    if out.exists():
        raise UsageError(
            "OUTPUT_EXISTS",
            f"refusing to write {out}: it exists",
            value=str(out),
            fix="choose a new output folder (-o)",
        )
    model_path = check_model_source(args.model)
    old_tok, new_tok = load_tokenizer(args.old), load_tokenizer(args.new)
    change = classify_change(old_tok, new_tok)
    if change.kind in ("removal", "mixed") and not args.accept_removal:
        raise CheckpointError(
            "NOT_APPEND_ONLY",
            f"the change from --old to --new is {change.kind}: {len(change.removed)} trained "
            "rows would be dropped from the model",
            value=change.kind,
            fix="pass --accept-removal to drop them on purpose",
        )
    model = load_model(model_path)
    rows_now = parameter(model, vocab_roles(model).input).shape[0]
    rows = row_map(change, old_rows=rows_now, accept_overlap=args.accept_overlap)
    random = None
    if args.init == "constructor":
        std = getattr(model.config, "initializer_range", 0.02)
        random = Initializer(name="normal", std=std)
    init = NewRows(name=args.init, random=random, seed=args.seed)
    sources = (
        decompositions(old_tok, new_tok, rows.new_row_ids) if args.init == "decomposition" else None
    )
    old_digest = model_digest(model_tensors(model))
    result = migrate_model(
        model,
        rows,
        init=init,
        bias=args.bias,
        bias_value=args.bias_value,
        sources=sources,
        old_hash=old_tok.address_hash,
        model_hash=folder_address_hash(model_path),
    )
    manifest = build_manifest(change=change, migration=result, model=model, old_model=old_digest)
    report = {"change": change.evidence(), "migration": result.to_json()}
    from tokembed.files.atomic import new_temp_folder

    tmp = new_temp_folder(out)  # named so that the stale-temp cleanup finds it after a kill
    try:
        tok_file = save_tokenizer(new_tok, tmp / "tokenizer.tokembed.json")
        tokenizer_bytes = tok_file.read_bytes()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    save_model_folder(
        out,
        model,
        address_hash=new_tok.address_hash,
        extra={
            "tokenizer.tokembed.json": tokenizer_bytes,
            "manifest.json": json.dumps(manifest.to_json(), indent=1).encode(),
            "report.json": json.dumps(report, indent=1).encode(),
        },
        inputs=inputs,
    )
    if args.json:
        print(json.dumps({**report, "manifest": manifest.to_json(), "output": str(out)}, indent=1))
    else:
        print(
            f"{change.kind}: {len(rows.pairs)} exact rows, {len(rows.new_row_ids)} initialized "
            f"({args.init}); {rows.old_rows} -> {rows.new_rows} rows; tensors: "
            f"{', '.join(result.tensors)}; tied: {result.roles.tied}\nwrote {out}"
        )
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    _add_migrate(sub)
