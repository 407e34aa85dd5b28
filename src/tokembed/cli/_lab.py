"""Subcommand `explain` (alias `lab`): the failure-lab scenarios and the error codes that guard them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from tokembed.cli._common import add_json, add_quiet, as_json, usage

if TYPE_CHECKING:
    from tokembed.audit.lab import Scenario

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
        help="explain the failure-lab scenarios and the error codes that guard them",
        description="Without KEY: every failure-lab scenario (id, guard code, status, title), "
        "then how many are guarded per group and in total. A scenario is guarded when its "
        "code is one of the library's registered error codes. With KEY: one scenario (by id "
        "or title), or one error code with its meaning and the scenarios it guards.",
    )
    p.add_argument(
        "key",
        nargs="?",
        metavar="KEY",
        help="a scenario id or title, or an error code such as TIE_NOT_SHARED",
    )
    p.add_argument("--group", type=_group, help=f"only group N (1 to {_GROUPS})")
    add_json(p)
    add_quiet(p)
    p.set_defaults(handler=_run_lab)


def _run_lab(args: argparse.Namespace) -> int:
    from tokembed.audit.lab import lab_coverage

    if args.key is None:
        coverage = lab_coverage(group=args.group)
        print(as_json(coverage.to_dict()) if args.json else coverage.format())
        return 0
    if args.group is not None:
        raise usage(
            "KEY names one scenario or code, --group lists a group; they do not combine",
            value=args.key,
            fix="give KEY or --group, not both",
        )
    found = _lookup(args.key)
    if isinstance(found, str):
        _print_code(found, json=args.json)
    else:
        _print_scenario(found, json=args.json)
    return 0


def _lookup(key: str) -> Scenario | str:
    """The scenario with this id or title, else the registered error code ``key``."""
    from tokembed.audit.lab import scenario
    from tokembed.errors import CODES, UsageError

    try:
        return scenario(key)
    except UsageError:
        pass
    code = key.strip().upper()
    if code in CODES:
        return code
    raise usage(
        f"no failure-lab scenario and no error code is named {key!r}",
        value=key,
        fix="run `tokembed explain` to list every scenario's id, code and title",
    )


def _print_scenario(s: Scenario, *, json: bool) -> None:
    from tokembed.errors import CODES

    meaning = CODES.get(s.code)
    if json:
        print(as_json({**s.to_dict(), "description": meaning}))
        return
    print(f"id     {s.id}")
    print(f"title  {s.title}")
    print(f"group  {s.group} {s.group_name}")
    print(f"code   {s.code} ({s.status})" + (f": {meaning}" if meaning else ""))


def _print_code(code: str, *, json: bool) -> None:
    from tokembed.audit.lab import SCENARIOS
    from tokembed.errors import CODES

    guards = [s for s in SCENARIOS if s.code == code]
    if json:
        scenarios = [s.to_dict() for s in guards]
        print(as_json({"code": code, "description": CODES[code], "scenarios": scenarios}))
        return
    print(f"code         {code}")
    print(f"description  {CODES[code]}")
    if not guards:
        print("scenarios    none in the failure lab")
    for i, s in enumerate(guards):
        print(f"{'scenarios' if i == 0 else '':<13}{s.id:<6} {s.title}")


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands."""
    _add_lab(sub)
