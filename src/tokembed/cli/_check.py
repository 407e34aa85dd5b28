"""Subcommand `check`: admit (or refuse) a tokenizer/model pair, one line per check."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tokembed.cli._common import add_json, add_quiet, add_tokenizer_option, as_json, load_tokenizer

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tokembed.audit.pair import check_pair, read_tokenizer_roles
    from tokembed.errors import AuditError
    from tokembed.tokenizer.formats.specs import split_spec

    tokenizer = load_tokenizer(args.tokenizer, args.encoding)
    path, _ = split_spec(args.tokenizer)
    roles = read_tokenizer_roles(path) if Path(path).exists() else {}
    report = check_pair(tokenizer, args.model, roles=roles, read_values=not args.headers_only)
    print(as_json(report.to_dict()) if args.json else report.format())
    try:
        report.require("PAIR_NOT_ADMITTED", fix="pair the tokenizer (-t) with its own model")
    except AuditError as exc:
        codes = ", ".join(dict.fromkeys(report.failed_codes))
        print(f"tokembed: {exc.code}: {len(report.failures)} checks fail ({codes}) — {exc.fix}",
              file=sys.stderr)  # fmt: skip
        return exc.exit_code
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    p = sub.add_parser(
        "check",
        help="check that a tokenizer and a model belong together",
        description="Admission of a tokenizer/model pair: the recorded address hash, V >= R and "
        "the holes between them, the BOS/EOS/PAD/UNK ids of the model's config against the "
        "tokenizer (and its tokenizer_config.json), tie claims against storage, the input-scale "
        "convention and the dtype ledger. One line per check with its code; exit 0 only when "
        "every check passes, 1 when one fails. MODEL is a folder (config.json and optionally "
        "*.safetensors, read by header) or a .gguf file.",
    )
    add_tokenizer_option(p)
    p.add_argument("model", metavar="MODEL", help="model folder or .gguf file")
    p.add_argument(
        "--headers-only",
        action="store_true",
        help="read no tensor values (skips the finiteness check of the input table)",
    )
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run)
