"""Subcommand `verify` (aliases `ties`, `checkpoint verify`): checkpoints and model folders against their claims."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tokembed.cli._common import add_quiet

__all__ = ["register"]


_VERIFY_HELP = "check a checkpoint or a model folder against what it claims"
_VERIFY_DESCRIPTION = (
    "A tokembed checkpoint file: its tensors, shapes, dtypes, alias map and (when recorded) "
    "SHA-256 digests against the metadata it carries. A transformers model folder "
    "(config.json + one .safetensors file): every pair of tables the config ties, unties or "
    "the architecture aliases, against what the weights file stores for it. Exit 1 when the "
    "file contradicts its claims."
)


def _add_verify_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        help="a .safetensors checkpoint written by tokembed, or a model folder with config.json "
        "and model.safetensors",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_quiet(p)
    p.set_defaults(handler=_run_verify)


def _add_verify(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "verify", aliases=["ties"], help=_VERIFY_HELP, description=_VERIFY_DESCRIPTION
    )
    _add_verify_options(p)
    # `checkpoint verify` is the two-word spelling of earlier releases; kept for scripts.
    # Without help= argparse leaves it out of the command list.
    group = sub.add_parser("checkpoint")
    actions = group.add_subparsers(dest="action", required=True, parser_class=type(group))
    _add_verify_options(
        actions.add_parser("verify", help=_VERIFY_HELP, description=_VERIFY_DESCRIPTION)
    )


def _run_verify(args: argparse.Namespace) -> int:
    if Path(args.path).is_dir():
        return _run_ties(args.path, as_json=args.json)
    from tokembed.checkpoint.format import verify_checkpoint

    summary = verify_checkpoint(args.path)
    print(json.dumps(summary.to_dict(), indent=2) if args.json else summary.format())
    return 0


def _run_ties(folder: str, *, as_json: bool) -> int:
    from tokembed.checkpoint.folder import folder_tie_report

    report = folder_tie_report(folder)
    print(json.dumps(report.to_dict(), indent=2) if as_json else report.format())
    for p in report.problems[:1]:
        print(f"tokembed: {p.code}: {p.left} and {p.right}: {p.detail}", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    _add_verify(sub)
