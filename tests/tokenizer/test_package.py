"""The package's public names, and the shape of its import graph (no cycles)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tokembed.tokenizer as package
from tokembed.tokenizer import formats

_SRC = Path(package.__file__).resolve().parents[2]


def test_file_functions_are_reexported_from_formats() -> None:
    for name in ("load_tokenizer", "save_tokenizer", "export_hf", "export_tiktoken"):
        assert name in package.__all__
        assert getattr(package, name) is getattr(formats, name)


def test_every_exported_name_resolves() -> None:
    for name in package.__all__:
        assert getattr(package, name) is not None


def test_importing_the_package_leaves_formats_unloaded() -> None:
    code = "import sys, tokembed.tokenizer; print('tokembed.tokenizer.formats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _module_name(path: Path) -> str:
    parts = path.relative_to(_SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Every import statement (top level, in functions, under TYPE_CHECKING) between modules."""
    files = {_module_name(p): p for p in (_SRC / "tokembed" / "tokenizer").rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                # `from pkg import submodule` depends on the submodule; the package's
                # own namespace is needed only for the other names.
                subs = [f"{node.module}.{a.name}" for a in node.names]
                found = [s for s in subs if s in files]
                names = found + ([node.module] if len(found) < len(subs) else [])
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            graph[module] |= {n for n in names if n in files and n != module}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return [*path[path.index(w) :], w]
            if w not in state and (found := visit(w)) is not None:
                return found
        state[v] = 2
        path.pop()
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)) is not None:
            return found
    return None


def test_tokenizer_modules_import_without_cycles() -> None:
    graph = _import_graph()
    assert "tokembed.tokenizer.merges" in graph["tokembed.tokenizer.encode"]
    assert "tokembed.tokenizer.merges" in graph["tokembed.tokenizer.train_reference"]
    assert _cycle(graph) is None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
