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
import re
import sys
from collections.abc import Callable, Sequence

from tokembed.cli import (
    _audit,
    _check,
    _checkpoint,
    _lab,
    _measure,
    _memory,
    _migrate,
    _shards,
    _tokenizer,
)
from tokembed.cli._common import OneLineParser, progress_wanted, quiet_libraries
from tokembed.errors import MeasureError, TokembedError

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
_AREAS = (_tokenizer, _shards, _measure, _memory, _checkpoint, _check, _audit, _migrate, _lab)


def _not_utf8_argument(argv: Sequence[str]) -> TokembedError | None:
    """The error for the first argument that was not UTF-8 on the command line (else None).

    Python decodes argv with ``surrogateescape``, so a byte that is not UTF-8 arrives as a
    lone surrogate U+DC80..U+DCFF. A file name may legitimately hold such bytes (it still
    opens); any other argument is text that cannot be encoded, named here by its byte.
    """
    for k, arg in enumerate(argv, start=1):
        bad = next((i for i, ch in enumerate(arg) if "\udc80" <= ch <= "\udcff"), None)
        if bad is None or os.path.lexists(arg):
            continue
        raw = arg.encode("utf-8", "surrogateescape")
        offset = len(arg[:bad].encode("utf-8", "surrogateescape"))
        return MeasureError(
            "INPUT_NOT_UTF8",
            f"command-line argument {k} is not UTF-8: byte 0x{raw[offset]:02x} at offset {offset}",
            value=(k, offset),
            fix="pass the text in UTF-8 (or in a file, with its path)",
        )
    return None


def _flags(parser: argparse.ArgumentParser, handler: object) -> dict[str, str]:
    """``{dest: --flag}`` of the subcommand whose handler is ``handler`` (its long options)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if child.get_default("handler") is handler:
                    found = {
                        a.dest: max(a.option_strings, key=len)
                        for a in child._actions
                        if a.option_strings and a.dest not in ("help",)
                    }
                    return found | _flags(child, handler)
                deeper = _flags(child, handler)
                if deeper:
                    return deeper
    return {}


def _in_flags(exc: TokembedError, flags: dict[str, str]) -> TokembedError:
    """``exc`` with each library parameter the user set through a flag named by that flag.

    A library fix such as "pass accept_overlap=True" reads "pass --accept-overlap" on the
    command line: the text names what the user typed. Only ``name=value`` forms of this
    command's own options are rewritten.
    """

    def speak(text: str | None) -> str | None:
        if not text:
            return text

        def one(m: re.Match[str]) -> str:
            flag, value = flags[m.group(1)], m.group(2)
            return flag if value == "True" else f"{flag} {value}"

        names = "|".join(re.escape(d) for d in sorted(flags, key=len, reverse=True))
        return re.sub(rf"\b({names})=([\w.+-]+|\.\.\.)", one, text) if names else text

    fix, message = speak(exc.fix), speak(exc.message)
    if (fix, message) == (exc.fix, exc.message):
        return exc
    return type(exc)(exc.code, message or "", value=exc.value, fix=fix)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tokembed`` console script; returns the exit code."""
    parser = _build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    bad = _not_utf8_argument(given)
    if bad is not None:
        print(f"tokembed: {bad}", file=sys.stderr)
        return bad.exit_code
    args = parser.parse_args(given)
    handler: _Handler = args.handler
    try:
        with quiet_libraries(not progress_wanted(args)):
            code = handler(args)
            sys.stdout.flush()  # a closed pipe shows here, inside the handler's try
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except TokembedError as exc:
        print(f"tokembed: {_in_flags(exc, _flags(parser, handler))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tokembed: interrupted", file=sys.stderr)
        return 130
