"""The handoff package's lazy exports: every public name resolves to the module that defines it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import tokembed.handoff as handoff


def test_every_public_name_resolves_to_its_module() -> None:
    assert sorted(handoff._SOURCES) == sorted(handoff.__all__)
    for name in handoff.__all__:
        source = importlib.import_module(f"tokembed.handoff.{handoff._SOURCES[name]}")
        assert getattr(handoff, name) is getattr(source, name)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        handoff.not_a_name  # noqa: B018


def test_importing_the_package_imports_no_submodule() -> None:
    code = "import sys, tokembed.handoff\nprint(sorted(m for m in sys.modules if m.startswith('tokembed.handoff.')))\n"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"
