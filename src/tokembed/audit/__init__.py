"""Audits before training: under-trained tokens, tokenizer/model admission, the initial state, the failure lab.

Each audit reads what a training script already has (a model folder or module, a
tokenizer, a batch) and answers with one line per check and a stable code, so a
script can stop before step 0 and a CI job can gate on the exit status.

Submodules are imported on first use of a name (see ``tokembed._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokembed._lazy import attach

if TYPE_CHECKING:
    from tokembed.audit._checks import (
        AuditReport,
        Check,
    )
    from tokembed.audit.conformance import (
        check_initial_state,
    )
    from tokembed.audit.pair import (
        check_pair,
        read_tokenizer_roles,
        require_pair,
    )
    from tokembed.audit.shapes import (
        LedgerDifference,
        LedgerEntry,
        ShapeLedger,
    )

# Public name -> submodule; each audit adds its names here.
_SOURCES: dict[str, str] = {
    "AuditReport": "_checks",
    "Check": "_checks",
    "check_initial_state": "conformance",
    "check_pair": "pair",
    "read_tokenizer_roles": "pair",
    "require_pair": "pair",
    "LedgerDifference": "shapes",
    "LedgerEntry": "shapes",
    "ShapeLedger": "shapes",
}

__all__ = [
    "AuditReport",
    "Check",
    "LedgerDifference",
    "LedgerEntry",
    "ShapeLedger",
    "check_initial_state",
    "check_pair",
    "read_tokenizer_roles",
    "require_pair",
]
__getattr__, __dir__ = attach(__name__, _SOURCES)
