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

from tokembed.cli import _measure, _memory, _migrate, _tokenizer
from tokembed.cli._common import OneLineParser
from tokembed.errors import TokembedError

__all__ = ["main"]

_Handler = Callable[[argparse.Namespace], int]


def _build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="tokembed", description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for area in _AREAS:
        area.register(sub)
    return parser


# Each area of the command line is one module with a `register(sub)` function.
_AREAS = (_memory, _tokenizer, _measure, _migrate)


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
