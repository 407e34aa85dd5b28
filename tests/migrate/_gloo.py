"""tests/parallel's gloo harness, importable from this folder (pytest puts each test folder on the path)."""

from __future__ import annotations

import sys
from pathlib import Path

_PARALLEL = str(Path(__file__).resolve().parents[1] / "parallel")
if _PARALLEL not in sys.path:
    sys.path.append(_PARALLEL)

from _harness import RankFailed, run_ranks  # noqa: E402

__all__ = ["RankFailed", "run_ranks"]
