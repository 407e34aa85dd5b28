"""Lazy package exports: a package's public names are imported from their modules on first use.

A package ``__init__`` that imports every submodule eagerly makes each of them pay
for the heaviest one (``tokembed.embedding`` pulled in torch, 2.75 s, for a
torch-free calculator). With :func:`attach` the package maps each public name to
the module that defines it and resolves it on first access (PEP 562 module
``__getattr__``); ``from package import Name`` behaves as an eager import would, and
type checkers read the real imports from an ``if TYPE_CHECKING:`` block.

Example::

    >>> __getattr__, __dir__ = attach(__name__, {"TableConfig": "memory"})  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["attach"]


def attach(
    package: str, sources: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose names ``sources`` maps to submodules.

    A resolved name is stored in the package, so later lookups do not come back here.

    Raises (from the returned ``__getattr__``):
        AttributeError: a name that ``sources`` does not list.
    """

    def __getattr__(name: str) -> Any:
        module = sources.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *sources})

    return __getattr__, __dir__
