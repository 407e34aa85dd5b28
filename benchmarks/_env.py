"""What every benchmark prints about the machine it ran on: load and thread settings.

The machine these benchmarks run on is shared, so a figure means little without the
load beside it; ours and the peer are always measured in the same run, and the load
is printed at its start and end. Thread settings are printed as they are, not set:
each benchmark says which settings it applies itself.
"""

from __future__ import annotations

import os
import sys

__all__ = ["load_line", "machine_line"]

# Environment variables that pick thread counts in the libraries measured here:
# OpenMP/MKL (torch intra-op), rayon (HF tokenizers, rustbpe, tiktoken batches),
# and the switch HF tokenizers reads before using rayon at all.
_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "RAYON_NUM_THREADS",
    "RAYON_RS_NUM_CPUS",
    "TOKENIZERS_PARALLELISM",
)


def load_line(when: str) -> str:
    """``load average (start): 1.23 0.98 0.51`` from ``os.getloadavg()`` (1, 5, 15 min)."""
    one, five, fifteen = os.getloadavg()
    return f"load average ({when}): {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def machine_line() -> str:
    """Python version, CPU count, and every thread variable (``unset`` where absent)."""
    env = " ".join(f"{k}={os.environ.get(k, 'unset')}" for k in _THREAD_VARS)
    return f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {env}"
