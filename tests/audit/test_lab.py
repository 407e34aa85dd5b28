"""The failure-lab registry agrees with the tests: every scenario has a registered code and a test asserting it.

A test triggers a scenario when the first line of its docstring is
``Failure lab: <title>`` (a parenthetical after the title is allowed). Each
scenario must have a registered guard code, at least one such test, every such
test must mention the code outside its docstring (it asserts it), and the
tests recorded in the shipped data must be exactly the tests found here.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from tokembed.audit import GROUP_SIZES, SCENARIOS, lab_coverage, scenario
from tokembed.cli import main
from tokembed.errors import CODES, UsageError

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "tokembed"
_MARKER = "failure lab: "


def _strings(node: ast.AST) -> set[str]:
    """String constants of a test function, its decorators included and its docstring excluded."""
    body = getattr(node, "body", [])
    skip = None
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        skip = body[0].value
    return {
        n.value
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n is not skip
    }


def _title(doc: str) -> str | None:
    first = doc.splitlines()[0].strip().lower() if doc else ""
    if not first.startswith(_MARKER):
        return None
    return first.removeprefix(_MARKER).split(" (")[0].rstrip(".").strip()


@cache
def _marked() -> dict[str, dict[str, set[str]]]:
    """Title -> {test node id -> string constants of that test}."""
    found: dict[str, dict[str, set[str]]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        rel = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        tests: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
        for top in tree.body:
            if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef):
                tests.append((f"{rel}::{top.name}", top))
            elif isinstance(top, ast.ClassDef):
                for item in top.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        tests.append((f"{rel}::{top.name}::{item.name}", item))
        for node_id, fn in tests:
            title = _title(ast.get_docstring(fn) or "")
            if fn.name.startswith("test_") and title is not None:
                found.setdefault(title, {})[node_id] = _strings(fn)
    return found


def test_eighty_four_scenarios_in_twelve_groups() -> None:
    assert len(SCENARIOS) == 84
    assert GROUP_SIZES == (4, 5, 15, 4, 13, 12, 11, 4, 4, 3, 5, 4)
    counts = Counter(s.group for s in SCENARIOS)
    assert [counts[g] for g in range(1, 13)] == list(GROUP_SIZES)
    expected = [f"{g}.{n}" for g, size in enumerate(GROUP_SIZES, 1) for n in range(1, size + 1)]
    assert [s.id for s in SCENARIOS] == expected  # every id once, in order
    assert len({s.title.lower() for s in SCENARIOS}) == 84  # docstrings match case-insensitively
    assert not any(s.title.endswith(".") for s in SCENARIOS)


@pytest.mark.parametrize("sid", [s.id for s in SCENARIOS])
def test_scenario_has_a_registered_code_and_a_test_that_asserts_it(sid: str) -> None:
    s = scenario(sid)
    assert s.code in CODES, f"{sid}: guard code {s.code} is not registered in errors.CODES"
    tests = _marked().get(s.title.lower(), {})
    assert tests, f"{sid}: no test starts its docstring with 'Failure lab: {s.title}'"
    silent = sorted(t for t, strings in tests.items() if s.code not in strings)
    assert silent == [], f"{sid}: these tests never mention {s.code}"
    assert s.tests == tuple(sorted(tests)), f"{sid}: record tests={tuple(sorted(tests))!r}"


@pytest.mark.parametrize("code", sorted({s.code for s in SCENARIOS}))
def test_every_guard_code_is_raised_by_the_library(code: str) -> None:
    # The lab's own data names every code; a guard must name it somewhere else too.
    lab_data = SRC / "audit" / "_scenarios.py"
    text = "\n".join(
        p.read_text(encoding="utf-8")
        for p in SRC.rglob("*.py")
        if p not in (lab_data, SRC / "errors.py")
    )
    assert f'"{code}"' in text


def test_no_marker_names_an_unknown_scenario() -> None:
    titles = {s.title.lower() for s in SCENARIOS}
    assert sorted(set(_marked()) - titles) == []  # a misspelled marker closes nothing


def test_lookup_by_id_and_title() -> None:
    assert scenario("6.3").code == "DIVERGENT_ALIAS_VALUES"
    assert scenario("Missing sqrt(d_model).").id == "7.1"
    with pytest.raises(UsageError) as e:
        scenario("13.1")
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(UsageError) as e:
        lab_coverage(group=0)
    assert e.value.code == "INVALID_ARGUMENT"


def test_coverage_counts_add_up() -> None:
    whole = lab_coverage()
    assert whole.total.scenarios == 84
    assert [g.scenarios for g in whole.groups] == list(GROUP_SIZES)
    for g in (*whole.groups, whole.total):
        assert g.guarded_and_tested + g.guarded_only + g.unguarded == g.scenarios
    assert whole.total.guarded_and_tested == sum(g.guarded_and_tested for g in whole.groups)
    six = lab_coverage(group=6)
    assert [s.id for s in six.scenarios] == [f"6.{n}" for n in range(1, 13)]
    assert (six.total.scenarios, six.total.guarded_and_tested) == (12, 12)


def test_cli_table_json_and_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["scenarios"]) == 84
    assert data["total"] == lab_coverage().total.to_dict()
    first = data["scenarios"][0]
    assert (first["id"], first["code"], first["status"]) == (
        "1.1", "IDENTITY_KIND_MISMATCH", "guarded+tested",
    )  # fmt: skip
    assert main(["--quiet", "lab", "--group", "12"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert re.match(r"12\.1 +HEAD_VOCAB_MISMATCH +guarded\+tested +Output head and", lines[1])
    assert lines[-1].split() == ["total", "4", "4", "4"]


@pytest.mark.parametrize("bad", ["0", "13", "six"])
def test_cli_group_out_of_range_is_a_usage_error(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["lab", "--group", bad])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "a group is a number from 1 to 12" in err


if __name__ == "__main__":
    # After adding or renaming a marked test: print the tests each scenario should record.
    for s in SCENARIOS:
        found = tuple(sorted(_marked().get(s.title.lower(), {})))
        if found != s.tests:
            print(f"{s.id}: {found!r}")
