"""Make tests/parallel's gloo harness importable from the migration tests."""

from __future__ import annotations

import sys
from pathlib import Path

_PARALLEL = str(Path(__file__).resolve().parents[1] / "parallel")
if _PARALLEL not in sys.path:
    sys.path.append(_PARALLEL)
