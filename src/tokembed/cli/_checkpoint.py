"""Subcommands `ties` and `checkpoint verify`: tie reports of model folders, checkpoint checks."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tokembed.cli._common import add_quiet

__all__ = ["register"]


def _add_ties(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "ties",
        help="check a model folder's tied tables against its config",
        description="For a transformers model folder (config.json + one .safetensors file): every "
        "pair of tables the config ties, unties or the architecture aliases, and what the weights "
        "file stores for it. Exit 1 when the file contradicts the config.",
    )
    p.add_argument("model_dir", help="folder with config.json and model.safetensors")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(p)
    p.set_defaults(handler=_run_ties)


def _run_ties(args: argparse.Namespace) -> int:
    from tokembed.checkpoint.folder import folder_tie_report

    report = folder_tie_report(args.model_dir)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    for p in report.problems[:1]:
        print(f"tokembed: {p.code}: {p.left} and {p.right}: {p.detail}", file=sys.stderr)
        return 1
    return 0


def _add_checkpoint(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("checkpoint", help="tokembed checkpoint files")
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    verify = actions.add_parser(
        "verify",
        help="check a checkpoint file against its metadata",
        description="Check that a tokembed checkpoint's tensors, shapes, dtypes, alias map and "
        "(when recorded) SHA-256 digests agree with the metadata it carries.",
    )
    verify.add_argument("path", help="a .safetensors file written by tokembed")
    verify.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_quiet(verify)
    verify.set_defaults(handler=_run_verify)


def _run_verify(args: argparse.Namespace) -> int:
    from tokembed.checkpoint.format import verify_checkpoint

    summary = verify_checkpoint(args.path)
    print(json.dumps(summary.to_dict(), indent=2) if args.json else summary.format())
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    _add_ties(sub)
    _add_checkpoint(sub)
