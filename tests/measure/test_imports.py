"""measure/ never imports torch (matplotlib only for a plot); its public surface, each name once."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import tokembed.measure

_MODULES = [
    "tokembed.artifacts.config",
    "tokembed.measure",
    "tokembed.measure.artifacts",
    "tokembed.measure.corpus",
    "tokembed.measure.curves",
    "tokembed.measure.demo",
    "tokembed.measure.memory",
    "tokembed.measure.metrics",
    "tokembed.measure.payloads",
    "tokembed.measure.partition",
    "tokembed.measure.report",
    "tokembed.measure.session",
    "tokembed.measure.tables",
    "tokembed.measure.vocab_sizes",
    "tokembed.text",
    "tokembed.text.conllu",
    "tokembed.text.ranges",
    "tokembed.text.sources",
]


def test_no_torch_and_no_eager_matplotlib() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in _MODULES)
        + "bad = sorted(m for m in ('torch', 'matplotlib', 'transformers') if m in sys.modules)\n"
        + "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""


def test_importing_the_package_loads_no_numpy_and_no_tokenizer() -> None:
    # `tokembed memory` imports tokembed.measure.memory, which runs the package's __init__:
    # NumPy and the tokenizer come with the first curve or demo, not with the import.
    code = (
        "import sys\n"
        "import tokembed.measure\n"
        "bad = ('numpy', 'tokembed.tokenizer', 'torch')\n"
        "print(','.join(sorted(m for m in bad if m in sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""


def test_every_public_name_is_its_modules_own() -> None:
    package = tokembed.measure
    modules = [
        importlib.import_module(m)
        for m in _MODULES
        if m.startswith("tokembed.measure.") and not m.rsplit(".", 1)[1].startswith("_")
    ]
    names = [n for m in modules for n in m.__all__]
    assert len(set(names)) == len(names)  # one home per name
    assert sorted(package.__all__) == sorted(names)
    for module in modules:
        for name in module.__all__:
            assert getattr(package, name) is getattr(module, name), name
    # The two functions named like their modules are the functions.
    assert package.partition is importlib.import_module("tokembed.measure.partition").partition
    assert (
        package.vocab_sizes is importlib.import_module("tokembed.measure.vocab_sizes").vocab_sizes
    )
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        package.not_a_name  # noqa: B018
