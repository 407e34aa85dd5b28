"""Subcommand `explain` (alias `lab`): the failure-lab scenarios, their guard codes and coverage."""

from __future__ import annotations

import argparse
from typing import Any

from tokembed.cli._common import add_json, add_quiet, as_json

__all__ = ["register"]

_GROUPS = 12


def _group(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= _GROUPS:
        raise argparse.ArgumentTypeError(f"a group is a number from 1 to {_GROUPS}, not {text!r}")
    return value


def _add_lab(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "explain",
        aliases=["lab"],
        help="explain the failure-lab scenarios: their guard codes and coverage",
        description="Every failure-lab scenario (id, guard code, status, title), then how many "
        "are guarded and tested per group and in total. A scenario is guarded when its code "
        "is registered and tested when tests that trigger it are recorded.",
    )
    p.add_argument("--group", type=_group, help=f"only group N (1 to {_GROUPS})")
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run_lab)


def _run_lab(args: argparse.Namespace) -> int:
    from tokembed.audit.lab import lab_coverage

    coverage = lab_coverage(group=args.group)
    print(as_json(coverage.to_dict()) if args.json else coverage.format())
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    _add_lab(sub)
