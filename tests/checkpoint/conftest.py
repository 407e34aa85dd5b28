"""Make the gloo harness of tests/parallel importable from this folder."""

from __future__ import annotations

import sys
from pathlib import Path

_PARALLEL = str(Path(__file__).resolve().parents[1] / "parallel")
if _PARALLEL not in sys.path:
    sys.path.insert(0, _PARALLEL)
