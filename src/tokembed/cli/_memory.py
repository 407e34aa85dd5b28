"""Subcommand `estimate` (alias `memory`): parameters and bytes of vocabulary tables."""

from __future__ import annotations

import argparse
from typing import Any

from tokembed.cli._common import add_json, add_quiet

__all__ = ["register"]


def _add_memory(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "estimate",
        aliases=["memory"],
        help="estimate the parameters and bytes of a model's vocabulary tables",
        description="Parameters, bytes, per-rank share and training state of the input/output "
        "vocabulary tables described by an HF config.json.",
    )
    p.add_argument("config", help="config.json, or a folder containing one")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (ceil(V/tp) rows each)")
    p.add_argument("--dtype", default="bf16", help="weight dtype: fp32, bf16, fp16, fp8")
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run_memory)


def _run_memory(args: argparse.Namespace) -> int:
    import json

    from tokembed.measure.memory import format_memory_report, load_table_config, memory_report

    report = memory_report(load_table_config(args.config), tp=args.tp, dtype=args.dtype)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_memory_report(report))
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    _add_memory(sub)
