"""measure/ (and the table calculator it uses) never imports torch; matplotlib only for a plot."""

from __future__ import annotations

import subprocess
import sys

_MODULES = [
    "tokembed.artifacts.config",
    "tokembed.embedding.memory",
    "tokembed.measure",
    "tokembed.measure.artifacts",
    "tokembed.measure.conllu",
    "tokembed.measure.corpus",
    "tokembed.measure.curves",
    "tokembed.measure.demo",
    "tokembed.measure.metrics",
    "tokembed.measure.partition",
    "tokembed.measure.report",
    "tokembed.measure.session",
    "tokembed.measure.sources",
    "tokembed.measure.tables",
    "tokembed.measure.vocab_sizes",
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
