"""The artifacts package: torch-free to import, every public name from the module that defines it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import tokembed.artifacts as artifacts

_MODULES = (
    "config",
    "dcp_io",
    "dcp_metadata",
    "digest",
    "gguf_reader",
    "models",
    "recorded_hash",
    "safetensors_header",
    "safetensors_writer",
)


def test_importing_the_package_imports_no_heavy_dependency() -> None:
    code = (
        "import sys\nimport tokembed.artifacts\n"
        + "".join(f"import tokembed.artifacts.{m}\n" for m in _MODULES)
        + "heavy = ('torch', 'safetensors', 'transformers', 'gguf')\n"
        + "print(','.join(sorted(m for m in heavy if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == ""


def test_every_public_name_is_written_once_in_its_module() -> None:
    owners: dict[str, str] = {}
    for name in _MODULES:
        module = importlib.import_module(f"tokembed.artifacts.{name}")
        for public in module.__all__:
            assert public not in owners, (public, owners.get(public), name)
            owners[public] = name
            assert getattr(artifacts, public) is getattr(module, public)
    assert sorted(owners) == sorted(artifacts.__all__)
