"""Audits before training: under-trained tokens, tokenizer/model admission, the initial state, the failure lab.

Each audit reads what a training script already has (a model folder or module, a
tokenizer, a batch) and answers with one line per check and a stable code, so a
script can stop before step 0 and a CI job can gate on the exit status.

Submodules are imported on first use of a name (see ``tokembed._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokembed._lazy import attach

if TYPE_CHECKING:  # the names are re-exported: __all__ below is computed from _SOURCES
    from tokembed.audit.tokens import (  # noqa: F401
        AuditConfig,
        TokenAudit,
        TokenRow,
        audit_model_path,
        audit_tokens,
    )

# Public name -> submodule; each audit adds its names here.
_SOURCES: dict[str, str] = {
    # under-trained tokens
    "AuditConfig": "tokens",
    "TokenAudit": "tokens",
    "TokenRow": "tokens",
    "audit_model_path": "tokens",
    "audit_tokens": "tokens",
}

__all__ = sorted(_SOURCES)
__getattr__, __dir__ = attach(__name__, _SOURCES)
