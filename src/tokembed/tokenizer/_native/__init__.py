"""Loading the compiled twins of the tokenizer's hot loops, or learning that they are absent.

The C sources beside this file are built by ``pip install`` (see ``setup.py``);
every one of them has a pure-Python reference twin that gives identical
results. :func:`load` returns the compiled module, or None when it was not
built (no compiler on the machine) or when ``TOKEMBED_PURE_PYTHON=1`` asks for
the reference paths (to compare them, or to rule the extension out of a bug).

Example::

    >>> load("no_such_module") is None
    True
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["load", "pure_python_forced"]


def pure_python_forced() -> bool:
    """True when ``TOKEMBED_PURE_PYTHON`` asks for the reference paths (any value but ``""``/``0``)."""
    return os.environ.get("TOKEMBED_PURE_PYTHON", "") not in ("", "0")


def load(name: str) -> ModuleType | None:
    """The compiled module ``tokembed.tokenizer._native.<name>``, or None when unavailable."""
    if pure_python_forced():
        return None
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ImportError:
        return None
