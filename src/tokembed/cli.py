"""Command-line interface: a thin layer over the library.

Each subcommand parses its options, calls library functions and prints. A
:class:`~tokembed.errors.TokembedError` becomes one line on stderr and exit code
1 (bad data) or 2 (usage); argparse mistakes also print one line and exit 2.
Nothing in the library imports this module.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from tokembed.errors import TokembedError

__all__ = ["main"]

_Handler = Callable[[argparse.Namespace], int]


class _OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage mistake in one line (exit 2), without the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"tokembed: usage: {message} (see `{self.prog} --help`)\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="tokembed", description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    for register in _REGISTRY:
        register(sub)
    return parser


def _add_memory(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "memory",
        help="parameters and bytes of a model's vocabulary tables",
        description="Parameters, bytes, per-rank share and training state of the input/output "
        "vocabulary tables described by an HF config.json.",
    )
    p.add_argument("config", help="config.json, or a folder containing one")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (ceil(V/tp) rows each)")
    p.add_argument("--dtype", default="bf16", help="weight dtype: fp32, bf16, fp16, fp8")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=_run_memory)


def _run_memory(args: argparse.Namespace) -> int:
    import json

    from tokembed.embedding.memory import format_memory_report, load_table_config, memory_report

    report = memory_report(load_table_config(args.config), tp=args.tp, dtype=args.dtype)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_memory_report(report))
    return 0


# Each area adds one `_add_<command>(sub)` function above and lists it here.
_REGISTRY: list[Callable[[argparse._SubParsersAction[Any]], None]] = [_add_memory]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tokembed`` console script; returns the exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    handler: _Handler = args.handler
    try:
        return handler(args)
    except TokembedError as exc:
        print(f"tokembed: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tokembed: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
