"""pytest plugin: which tests carry ``@pytest.mark.failure_lab(ID, ...)``, recorded at collection.

A test that triggers a failure-lab scenario carries the marker with the scenario's id and
asserts the scenario's guard code::

    @pytest.mark.failure_lab("6.3")
    def test_two_declared_alias_keys_contain_different_values() -> None: ...

Several ids go in one marker (``failure_lab("4.3", "7.7")``); repeated markers are read too.
At collection, before ``-k``, ``-m`` or ``--deselect`` drop anything, this plugin records
for every id the node ids of the tests marked with it, and for each of them whether the
test's source (decorators included, docstring excluded) names the scenario's guard code as
a string. ``tests/audit/test_lab.py`` checks that record against the registry in
:mod:`tokembed.audit.lab`; the library itself never reads tests.

``tests/conftest.py`` loads this module. When the running session did not collect the whole
``tests/`` tree (``pytest tests/audit/test_lab.py``), :func:`collect_in_subprocess` collects
it in a child ``pytest --collect-only``, which writes its record to the JSON file named by
``$TOKEMBED_LAB_RECORD``.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ENV", "LabRecord", "collect_in_subprocess", "names_code", "recorded"]

ENV = "TOKEMBED_LAB_RECORD"
_NAME = "failure-lab-marks"
# The child collects the tree without running anything; this plugin writes the record.
_COLLECT = ("-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests")


@dataclass
class LabRecord:
    """What one collection saw.

    Attributes:
        marks: scenario id -> {node id -> whether that test names the scenario's code}.
            An id the registry does not know is recorded too (with ``False``).
        modules: test files whose collection started, relative to the root (posix).
        errors: node ids of collectors that failed (a file that does not import).
    """

    marks: dict[str, dict[str, bool]] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def missing(self, root: Path) -> list[str]:
        """Test files under ``root/tests`` this collection did not reach (empty when complete)."""
        every = {p.relative_to(root).as_posix() for p in (root / "tests").rglob("test_*.py")}
        return sorted(every - self.modules)

    def to_json(self) -> str:
        return json.dumps(
            {"marks": self.marks, "modules": sorted(self.modules), "errors": self.errors}
        )

    @classmethod
    def from_json(cls, text: str) -> LabRecord:
        data = json.loads(text)
        return cls(marks=data["marks"], modules=set(data["modules"]), errors=data["errors"])


def names_code(function: Callable[..., Any], code: str) -> bool:
    """``code`` is a string constant in ``function``'s source, its docstring left out."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    (node,) = tree.body
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    first = node.body[0]
    doc = first.value if isinstance(first, ast.Expr) else None
    return any(
        isinstance(n, ast.Constant) and n.value == code and n is not doc for n in ast.walk(node)
    )


class _Recorder:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.record = LabRecord()
        self._mentions: dict[tuple[Callable[..., Any], str], bool] = {}

    @pytest.hookimpl
    def pytest_collectstart(self, collector: pytest.Collector) -> None:
        if isinstance(collector, pytest.Module):
            self.record.modules.add(collector.path.relative_to(self.root).as_posix())

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.record.errors.append(report.nodeid)

    # tryfirst: record before -k, -m, --deselect or --last-failed drop items.
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        codes: dict[str, str] | None = None
        for item in items:
            ids = [arg for mark in item.iter_markers("failure_lab") for arg in mark.args]
            if not ids:
                continue
            if codes is None:  # the registry is imported only once a marked test exists
                from tokembed.audit.lab import SCENARIOS

                codes = {s.id: s.code for s in SCENARIOS}
            function = getattr(item, "function", None)
            for sid in ids:
                code = codes.get(sid) if isinstance(sid, str) else None
                mentions = code is not None and function is not None
                if mentions:
                    key = (function, code)
                    if key not in self._mentions:
                        self._mentions[key] = names_code(function, code)
                    mentions = self._mentions[key]
                self.record.marks.setdefault(str(sid), {})[item.nodeid] = mentions

    @pytest.hookimpl
    def pytest_collection_finish(self) -> None:
        out = os.environ.get(ENV)
        if out:
            Path(out).write_text(self.record.to_json(), encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Recorder(config.rootpath), _NAME)


def recorded(config: pytest.Config) -> LabRecord:
    """The record of the running session (or of this xdist worker)."""
    recorder = config.pluginmanager.get_plugin(_NAME)
    assert isinstance(recorder, _Recorder), "tests/conftest.py did not load _lab_marks"
    return recorder.record


def collect_in_subprocess(root: Path, *, timeout: float = 600) -> LabRecord:
    """Collect the whole ``root/tests`` tree in a child pytest and return its record.

    Fails the calling test (never skips it) when the child fails; the end of its output
    is in the message.
    """
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "lab.json"
        done = subprocess.run(
            [sys.executable, *_COLLECT],
            cwd=root,
            env={**os.environ, ENV: str(out)},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0 or not out.exists():
            tail = (done.stdout + done.stderr)[-3000:]
            pytest.fail(f"collecting tests/ in a child pytest failed:\n{tail}", pytrace=False)
        return LabRecord.from_json(out.read_text(encoding="utf-8"))
