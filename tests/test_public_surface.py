"""Package faces: every public name comes from the ``__all__`` of the module that defines it.

A package ``__init__`` star-imports its modules and adds up their ``__all__``, so each
public name is written once, where it is defined, and nothing is imported lazily. These
checks keep it so: every public module of the package is either starred into the face
(and its ``__all__`` added) or imported as a module (``from tokembed.embedding import
oracles``); each exported name resolves to its module's own object; a class or function
is exported by the module that defines it.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
# Every public package of the library (the command line is no library: it exports `main`).
PACKAGES = tuple(
    ".".join(init.parent.relative_to(SRC).parts)
    for init in sorted((SRC / "tokembed").rglob("__init__.py"))
    if not any(part.startswith("_") for part in init.parent.relative_to(SRC).parts)
    and init.parent != SRC / "tokembed"
    and "cli" not in init.parent.relative_to(SRC).parts
)


def _face(name: str) -> tuple[list[str], list[str], list[str]]:
    """(starred modules, modules whose __all__ is added, modules imported as modules) of ``name``."""
    package = importlib.import_module(name)
    tree = ast.parse(Path(package.__file__ or "").read_text(encoding="utf-8"))
    starred, added, as_modules = [], [], []
    bound: dict[str, str] = {}  # the name a module is bound to in the face -> the module
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            if [a.name for a in node.names] == ["*"]:
                starred.append(node.module)
            elif node.module == name:
                for a in node.names:
                    bound[a.asname or a.name] = f"{name}.{a.name}"
        elif isinstance(node, ast.AugAssign) and isinstance(node.value, ast.Attribute):
            assert isinstance(node.value.value, ast.Name)
            added.append(bound[node.value.value.id])
    as_modules = [m for m in bound.values() if m not in starred]
    return starred, added, as_modules


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_resolves_to_the_module_that_defines_it(name: str) -> None:
    package = importlib.import_module(name)
    starred, added, as_modules = _face(name)
    assert starred == added, "each starred module's __all__ is added, in the same order"
    public = {
        f"{name}.{info.name}"
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    }
    assert set(starred) | set(as_modules) == public, "every public module is reachable"
    assert "__getattr__" not in vars(package), "no lazy resolution"
    expected: list[str] = []
    for module_name in starred:
        module = importlib.import_module(module_name)
        assert isinstance(module.__all__, list), f"{module_name}.__all__ is not a list"
        expected += module.__all__
        for public_name in module.__all__:
            value = getattr(package, public_name)
            assert value is getattr(module, public_name), f"{public_name} is not {module_name}'s"
            if inspect.isclass(value) or inspect.isfunction(value):
                # A starred subpackage (tokenizer's formats) exports its own modules' names.
                inside = hasattr(module, "__path__") and value.__module__.startswith(
                    f"{module_name}."
                )
                assert value.__module__ == module_name or inside, (
                    f"{public_name} is defined in {value.__module__}, exported by {module_name}"
                )
    assert package.__all__ == expected
    for module_name in as_modules:
        assert getattr(package, module_name.rpartition(".")[2]) is importlib.import_module(
            module_name
        )


def test_every_package_is_checked() -> None:
    assert {"tokembed.audit", "tokembed.measure", "tokembed.text", "tokembed.files"} <= set(
        PACKAGES
    )


def test_the_embedding_face_is_grouped() -> None:
    from tokembed import embedding

    assert {"TokenEmbedding", "LookupConfig", "AddressedIds", "validate_ids"} <= set(
        embedding.__all__
    )
    assert "check_pad_masks" in embedding.guards.__all__
    assert "check_pad_masks" not in embedding.__all__
    assert "TokenEmbeddingBag" in embedding.variants.__all__
    assert "TokenEmbeddingBag" not in embedding.__all__
    assert embedding.oracles.gather.__module__ == "tokembed.embedding.oracles"


def test_unknown_names_fail_as_on_any_module() -> None:
    import tokembed.inputs

    with pytest.raises(AttributeError, match="not_a_name"):
        tokembed.inputs.not_a_name  # noqa: B018
