"""The layout docs/design.md draws holds in the code: floors, no cycles, private modules kept private.

Read from the source text alone (``ast``), every import counts: module level,
inside functions and under ``TYPE_CHECKING``. The rules:

* a package imports only packages on lower floors (``_FLOORS``), or itself;
* no import cycle between modules, inside a package or across packages;
* a ``_private`` module is private to the package that holds it and that
  package's subpackages;
* nothing imports the CLI;
* every public module has its test module, or docs/design.md says where its tests are.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from conftest import REPO

SRC = REPO / "src"

# Floor of each top-level part of tokembed (docs/design.md's table); a part may import parts
# on lower floors only. Two parts on one floor know nothing of each other.
_FLOORS: dict[str, int] = {
    "errors": 0,
    "files": 1,
    "text": 2,
    "tokenizer": 3,
    "artifacts": 3,
    "measure": 4,
    "embedding": 5,
    "inputs": 6,
    "parallel": 6,
    "checkpoint": 7,
    "migrate": 8,
    "audit": 9,
    "cli": 10,
}
# Root modules that every part may use (the version, the package's own face).
_ROOT = {"tokembed", "tokembed._determinism"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / "tokembed").rglob("*.py"))}


def _imports(module: str) -> Iterator[str]:
    """Every tokembed module ``module`` imports (a name imported from a package that is a
    submodule counts as that submodule)."""
    path = _modules()[module]
    known = _modules()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, _is_package(path), node)
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            # `from pkg import sub` depends on the module sub; the package itself (run first
            # anyway, as every submodule's parent) counts only when a name comes from its face.
            targets = subs if len(subs) == len(node.names) else [base, *subs]
        else:
            continue
        for target in targets:
            if target == "tokembed" or target.startswith("tokembed."):
                # An import of a.b.c loads a.b.c; a name that is no module belongs to its module.
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in known and target != module:
                    yield target


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_part_has_a_floor() -> None:
    parts = {_part(m) for m in _modules() if m not in _ROOT}
    assert sorted(parts - set(_FLOORS)) == []


def test_imports_point_down() -> None:
    upward = []
    for module in _modules():
        if module in _ROOT:
            continue
        for target in _imports(module):
            if target in _ROOT:
                continue
            mine, theirs = _part(module), _part(target)
            if mine != theirs and _FLOORS[theirs] >= _FLOORS[mine]:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_no_import_cycles() -> None:
    graph = {m: sorted(set(_imports(m))) for m in _modules() if m != "tokembed"}
    graph = {m: [t for t in ts if t != "tokembed"] for m, ts in graph.items()}
    # Tarjan's strongly connected components; any component of two or more is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_private_modules_stay_in_their_package() -> None:
    leaks = []
    for module in _modules():
        for target in _imports(module):
            parts = target.split(".")
            for depth, name in enumerate(parts):
                if name.startswith("_") and not name.startswith("__"):
                    owner = ".".join(parts[:depth])  # the package that holds the private module
                    if not (module == owner or module.startswith(owner + ".")):
                        leaks.append(f"{module} -> {target}")
                    break
    assert leaks == []


def test_nothing_imports_the_cli() -> None:
    users = sorted(
        m for m in _modules() if _part(m) != "cli" for t in _imports(m) if _part(t) == "cli"
    )
    assert users == []


def _tested_elsewhere() -> set[str]:
    """Modules docs/design.md lists, in its table of tests that live elsewhere."""
    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("### Tests mirror the package tree", 1)[1].split("\n## ", 1)[0]
    listed: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            listed |= {part.strip().strip("`") for part in first.split(",")}
    return listed


def test_tests_mirror_the_package_tree() -> None:
    elsewhere = _tested_elsewhere()
    unmirrored = []
    for path in _modules().values():
        rel = path.relative_to(SRC / "tokembed")
        private = any(part.startswith("_") for part in rel.parts)
        if private or rel.parts[0] == "cli":
            continue
        mirror = REPO / "tests" / rel.parent / f"test_{rel.stem}.py"
        if not mirror.exists() and rel.as_posix() not in elsewhere:
            unmirrored.append(rel.as_posix())
    assert unmirrored == []
    # The table names only modules that exist and are not mirrored already.
    stale = sorted(
        m
        for m in elsewhere
        if not (SRC / "tokembed" / m).exists()
        or (REPO / "tests" / Path(m).parent / f"test_{Path(m).stem}.py").exists()
    )
    assert stale == []
