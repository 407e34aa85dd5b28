"""Lazy package exports: names resolve on first use, unknown names fail, the package stays whole."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize("package", ["tokembed.measure"])
def test_every_public_name_resolves_to_its_module(package: str) -> None:
    mod = importlib.import_module(package)
    assert sorted(mod._SOURCES) == sorted(mod.__all__)
    for name in mod.__all__:
        value = getattr(mod, name)
        source = importlib.import_module(f"{package}.{mod._SOURCES[name]}")
        assert value is getattr(source, name)
    assert set(mod.__all__) <= set(dir(mod))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        mod.not_a_name  # noqa: B018


def test_reading_text_loads_neither_numpy_nor_torch() -> None:
    code = (
        "import sys\n"
        "from tokembed.measure import read_texts\n"
        "import tokembed.measure.sources\n"
        "print(sorted(m for m in ('numpy', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"
