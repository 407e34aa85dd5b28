"""Command-line interface: a thin layer over the library.

One grammar: ``tokembed VERB [INPUT ...] [options]``. Every command is a verb that
says what it does (train, encode, decode, export, inspect, measure, report, demo,
estimate, verify, check, audit, migrate, explain); what it acts on comes as
arguments: text and corpora as positional paths (``-`` for stdin), a tokenizer
always as ``-t``, a model as a positional path, an output as ``-o``. Names from
earlier releases stay accepted as aliases (``memory`` = ``estimate``, ``ties`` and
``checkpoint verify`` = ``verify``, ``lab`` = ``explain``), so scripts keep working.

Each subcommand parses its options, calls library functions and prints. A
:class:`~tokembed.errors.TokembedError` becomes one line on stderr and exit code
1 (bad data) or 2 (usage); argparse mistakes also print one line and exit 2.
A reader that closes the pipe early (``| head``) ends the command quietly, with
the exit status of a process killed by SIGPIPE (141), as ``cat`` would.
The conventions every subcommand follows are in ``_common``.
Nothing in the library imports this module.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from tokembed.cli import _audit, _check, _checkpoint, _lab, _measure, _memory, _migrate, _tokenizer
from tokembed.cli._common import OneLineParser
from tokembed.errors import TokembedError

__all__ = ["main"]

_Handler = Callable[[argparse.Namespace], int]


def _build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="tokembed", description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--version", action="version", version=f"tokembed {_version()}")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=OneLineParser, metavar="COMMAND"
    )
    for area in _AREAS:
        area.register(sub)
    return parser


def _version() -> str:
    from tokembed import __version__

    return __version__


_SIGPIPE_EXIT = 128 + 13


def _closed_pipe() -> int:
    # Point stdout at /dev/null so the interpreter's final flush does not raise again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return _SIGPIPE_EXIT


# Each area of the command line is one module with a `register(sub)` function; the order is
# the order of `tokembed --help`: text and tokenizers first, then models, then the lab.
_AREAS = (_tokenizer, _measure, _memory, _checkpoint, _check, _audit, _migrate, _lab)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tokembed`` console script; returns the exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    handler: _Handler = args.handler
    try:
        code = handler(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler's try
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except TokembedError as exc:
        print(f"tokembed: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tokembed: interrupted", file=sys.stderr)
        return 130
