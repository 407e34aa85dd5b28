"""Every vocabulary-and-table failure scenario has a test here that triggers it and asserts a code.

The tests name their scenario in the first line of their docstring ("Failure lab: ...");
this index fails when one of the fifteen loses its test.
"""

from __future__ import annotations

import ast
from pathlib import Path

SCENARIOS = (
    "tokenizer vocabulary and embedding row count mismatch",
    "tokenizer/model mismatch",
    "source and target embedding tables swapped",
    "shared embedding assumed when the implementation uses separate tables",
    "target generator initialized with v_src",
    "a reordered vocabulary is called append-only",
    "an approximate initializer is recorded as an exact row copy",
    "old raw logits are preserved, so old probabilities are assumed preserved",
    "the embedding grows but the untied output head or bias does not",
    "adam moments are resized but the step is reset",
    "only the sparse lookup gradient is masked to freeze old tied rows",
    "physical shards are edited independently without a canonical reconstruction",
    "quantized bytes are appended without regenerating group metadata",
    "t1/m0 is admitted because most ids are still in range",
    "rollback restores m0 while retaining t1 ids or candidate cache state",
)
# Scenarios of other groups that these tests also close.
OTHER_GROUPS = ("equal vocabulary size admitted as address compatibility",)


def _lab_tests() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                doc = (ast.get_docstring(node) or "").lower()
                if doc.startswith("failure lab: "):
                    title = doc.splitlines()[0].removeprefix("failure lab: ").rstrip(".")
                    title = title.split(" (")[0]
                    found.setdefault(title, []).append(f"{path.name}::{node.name}")
    return found


def test_all_fifteen_scenarios_have_a_test() -> None:
    found = _lab_tests()
    assert [s for s in SCENARIOS if s not in found] == []
    assert sorted(set(found) - set(SCENARIOS) - set(OTHER_GROUPS)) == []  # no misspelled names
