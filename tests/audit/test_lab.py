"""The failure-lab registry agrees with the tests: every scenario has a registered code and a test asserting it.

A test triggers a scenario when it carries ``@pytest.mark.failure_lab("<id>")``
(``tests/_lab_marks.py`` records the marked tests while pytest collects them).
Each scenario must have a registered guard code and at least one marked test,
every marked test must name the code outside its docstring (it asserts it),
and no marker may name an id the registry does not have.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from _lab_marks import LabRecord, collect_in_subprocess, names_code, recorded
from tokembed.audit import GROUP_SIZES, SCENARIOS, lab_coverage, scenario
from tokembed.cli import main
from tokembed.errors import CODES, UsageError

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "tokembed"


@pytest.fixture(scope="module")
def marks(pytestconfig: pytest.Config) -> dict[str, dict[str, bool]]:
    """Scenario id -> {marked test's node id -> it names the code}, over the whole tests/ tree.

    This session's own record when it collected every test file (``pytest tests``, with
    or without ``-k``/``-m``, and each xdist worker of it); otherwise (this file run alone,
    or beside a few others) a child pytest collects the tree. Never skipped.
    """
    record: LabRecord = recorded(pytestconfig)
    if record.missing(REPO) or record.errors:
        started = time.perf_counter()
        record = collect_in_subprocess(REPO)
        took = time.perf_counter() - started
        print(f"failure lab: collected tests/ in a child pytest in {took:.1f} s")
    assert record.missing(REPO) == [], "the collection did not reach these test files"
    assert record.errors == [], "these test files did not collect"
    return record.marks


def test_eighty_four_scenarios_in_twelve_groups() -> None:
    assert len(SCENARIOS) == 84
    assert GROUP_SIZES == (4, 5, 15, 4, 13, 12, 11, 4, 4, 3, 5, 4)
    counts = Counter(s.group for s in SCENARIOS)
    assert [counts[g] for g in range(1, 13)] == list(GROUP_SIZES)
    expected = [f"{g}.{n}" for g, size in enumerate(GROUP_SIZES, 1) for n in range(1, size + 1)]
    assert [s.id for s in SCENARIOS] == expected  # every id once, in order
    assert len({s.title.lower() for s in SCENARIOS}) == 84  # titles are looked up in any case
    assert not any(s.title.endswith(".") for s in SCENARIOS)


@pytest.mark.parametrize("sid", [s.id for s in SCENARIOS])
def test_scenario_has_a_registered_code_and_a_marked_test_that_asserts_it(
    sid: str, marks: dict[str, dict[str, bool]]
) -> None:
    s = scenario(sid)
    assert s.code in CODES, f"{sid}: guard code {s.code} is not registered in errors.CODES"
    tests = marks.get(sid, {})
    assert tests, f"{sid}: no test carries @pytest.mark.failure_lab({sid!r})"
    silent = sorted(node for node, names in tests.items() if not names)
    assert silent == [], f"{sid}: these tests never mention {s.code}"


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


def test_no_marker_names_an_unknown_scenario(marks: dict[str, dict[str, bool]]) -> None:
    ids = {s.id for s in SCENARIOS}
    unknown = {sid: sorted(tests) for sid, tests in marks.items() if sid not in ids}
    assert unknown == {}  # a mistyped id closes nothing


def test_a_test_names_a_code_only_outside_its_docstring() -> None:
    def asserts(code: str) -> None:
        """Mentions TIE_NOT_SHARED here too."""
        assert code == "TIE_NOT_SHARED"

    def only_documents() -> None:
        """Raises TIE_NOT_SHARED."""

    assert names_code(asserts, "TIE_NOT_SHARED")
    assert not names_code(only_documents, "TIE_NOT_SHARED")
    assert not names_code(asserts, "DIVERGENT_ALIAS_VALUES")


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
        assert g.guarded + g.unguarded == g.scenarios
    assert whole.total.guarded == sum(g.guarded for g in whole.groups) == 84
    six = lab_coverage(group=6)
    assert [s.id for s in six.scenarios] == [f"6.{n}" for n in range(1, 13)]
    assert (six.total.scenarios, six.total.guarded) == (12, 12)


def test_cli_table_json_and_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["scenarios"]) == 84
    assert data["total"] == lab_coverage().total.to_dict()
    first = data["scenarios"][0]
    assert (first["id"], first["code"], first["status"]) == (
        "1.1", "IDENTITY_KIND_MISMATCH", "guarded",
    )  # fmt: skip
    assert "tests" not in first  # the package names no test files
    assert main(["--quiet", "lab", "--group", "12"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert re.match(r"12\.1 +HEAD_VOCAB_MISMATCH +guarded +Output head and", lines[1])
    assert lines[-2].split() == ["12", "output", "head", "and", "weight", "tying", "4", "0", "4"]
    assert lines[-1].split() == ["total", "4", "0", "4"]


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


@pytest.mark.parametrize("key", ["6.3", "two declared alias keys contain different values."])
def test_cli_key_prints_one_scenario(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", key]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "id     6.3",
        "title  Two declared alias keys contain different values",
        "group  6 weight tying, checkpoint and output ownership",
        f"code   DIVERGENT_ALIAS_VALUES (guarded): {CODES['DIVERGENT_ALIAS_VALUES']}",
    ]
    assert main(["lab", key, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == {**scenario("6.3").to_dict(), "description": CODES["DIVERGENT_ALIAS_VALUES"]}


def test_cli_key_prints_a_code_and_the_scenarios_it_guards(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "TIE_NOT_SHARED"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "code         TIE_NOT_SHARED",
        f"description  {CODES['TIE_NOT_SHARED']}",
        "scenarios    1.3    Tied weights accepted from equal values",
        "             3.4    Shared embedding assumed when the implementation uses separate tables",
        "             6.1    Equal values are mistaken for one parameter",
        "             12.2   Assuming tied weights when the implementation does not tie",
    ]
    assert main(["explain", "tie_not_shared", "--json"]) == 0  # codes in any case
    data = json.loads(capsys.readouterr().out)
    assert (data["code"], data["description"]) == ("TIE_NOT_SHARED", CODES["TIE_NOT_SHARED"])
    assert [s["id"] for s in data["scenarios"]] == ["1.3", "3.4", "6.1", "12.2"]
    assert main(["explain", "INVALID_ARGUMENT"]) == 0  # a code no scenario uses
    assert capsys.readouterr().out.splitlines()[-1] == "scenarios    none in the failure lab"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["explain", "13.1"], "no failure-lab scenario and no error code is named '13.1'"),
        (["explain", "NOT_A_CODE"], "no failure-lab scenario and no error code"),
        (["explain", "6.3", "--group", "6"], "give KEY or --group, not both"),
    ],
)
def test_cli_unknown_key_is_a_coded_usage_error(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("tokembed: INVALID_ARGUMENT: ")
    assert says in err
    if "--group" not in argv:
        assert "run `tokembed explain` to list" in err
