"""The package's public names, and the shape of its import graph (no cycles, no private
imports across packages, no function-level imports of our own modules)."""

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


def test_importing_the_package_imports_no_optional_library() -> None:
    heavy = ("tiktoken", "tokenizers", "torch", "transformers", "dask", "distributed")
    code = f"import sys, tokembed.tokenizer; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_package_face_lists_each_name_once() -> None:
    assert len(package.__all__) == len(set(package.__all__))
    assert len(formats.__all__) == len(set(formats.__all__))
    for name in formats.__all__:
        assert getattr(package, name) is getattr(formats, name)


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
    assert "tokembed.tokenizer.patterns" in graph["tokembed.tokenizer.compiled"]
    assert _cycle(graph) is None


def _imports(path: Path) -> list[tuple[ast.ImportFrom | ast.Import, bool]]:
    """Every import statement of a file, and whether it is at module level (or under
    ``if TYPE_CHECKING``) rather than inside a function."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    top |= {id(m) for n in tree.body if isinstance(n, ast.If) for m in n.body}
    return [(n, id(n) in top) for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_no_function_level_import_of_our_own_modules() -> None:
    """Our own modules are imported at the top: a cycle is not dodged by importing late."""
    for path in (_SRC / "tokembed" / "tokenizer").rglob("*.py"):
        for node, at_top in _imports(path):
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            ours = (module or "").startswith("tokembed")
            assert at_top or not ours, (path, node.lineno)


def _imported_names(node: ast.ImportFrom | ast.Import) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    assert node.module is not None
    return [node.module, *(f"{node.module}.{a.name}" for a in node.names)]


def test_no_private_module_of_another_package_is_imported() -> None:
    """A subpackage counts as another package: formats/ uses only public tokenizer modules,
    and the tokenizer none of formats/'s private ones."""
    for path in (_SRC / "tokembed" / "tokenizer").rglob("*.py"):
        module = _module_name(path)
        own = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node, _ in _imports(path):
            for name in _imported_names(node):
                parts = name.split(".")
                if parts[0] != "tokembed":
                    continue
                private = next((k for k, p in enumerate(parts) if p.startswith("_")), None)
                if private is not None:  # the package a private name belongs to is its own
                    assert ".".join(parts[:private]) == own, (path, node.lineno, name)


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
