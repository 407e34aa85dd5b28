"""tokembed.text: reading text loads neither NumPy nor torch; each public name has one home."""

from __future__ import annotations

import subprocess
import sys

import tokembed.text
from tokembed.text import conllu, documents, jsonl, ranges, sources


def test_reading_text_loads_neither_numpy_nor_torch() -> None:
    code = (
        "import sys\n"
        "from tokembed.text import read_texts\n"
        "import tokembed.text.sources\n"
        "print(sorted(m for m in ('numpy', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def test_every_public_name_is_its_modules_own() -> None:
    modules = (conllu, documents, jsonl, ranges, sources)
    names = [n for m in modules for n in m.__all__]
    assert sorted(tokembed.text.__all__) == sorted(names)
    assert len(set(names)) == len(names)  # one home per name
    for module in modules:
        for name in module.__all__:
            assert getattr(tokembed.text, name) is getattr(module, name)
