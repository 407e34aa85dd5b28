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
    from tokembed.audit.identity import (
        Identity,
        IdentityKind,
        address_identity,
        artifact_identity,
        checkpoint_identity,
        require_identity,
        table_identity,
    )
    from tokembed.audit.lab import (
        GROUP_SIZES,
        SCENARIOS,
        GroupCoverage,
        LabCoverage,
        Scenario,
        ScenarioStatus,
        lab_coverage,
        scenario,
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
    from tokembed.audit.tokens import (
        AuditConfig,
        TokenAudit,
        TokenRow,
        audit_model_path,
        audit_tokens,
    )

# Public name -> submodule; each audit adds its names here.
_SOURCES: dict[str, str] = {
    # failure lab
    "GROUP_SIZES": "lab",
    "SCENARIOS": "lab",
    "GroupCoverage": "lab",
    "LabCoverage": "lab",
    "Scenario": "lab",
    "ScenarioStatus": "lab",
    "lab_coverage": "lab",
    "scenario": "lab",
    # identities of a release
    "Identity": "identity",
    "IdentityKind": "identity",
    "address_identity": "identity",
    "artifact_identity": "identity",
    "checkpoint_identity": "identity",
    "require_identity": "identity",
    "table_identity": "identity",
    # under-trained tokens
    "AuditConfig": "tokens",
    "TokenAudit": "tokens",
    "TokenRow": "tokens",
    "audit_model_path": "tokens",
    "audit_tokens": "tokens",
    # tokenizer/model admission and the initial state
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
    "GROUP_SIZES",
    "SCENARIOS",
    "AuditConfig",
    "AuditReport",
    "Check",
    "GroupCoverage",
    "Identity",
    "IdentityKind",
    "LabCoverage",
    "LedgerDifference",
    "LedgerEntry",
    "Scenario",
    "ScenarioStatus",
    "ShapeLedger",
    "TokenAudit",
    "TokenRow",
    "address_identity",
    "artifact_identity",
    "audit_model_path",
    "audit_tokens",
    "check_initial_state",
    "check_pair",
    "checkpoint_identity",
    "lab_coverage",
    "read_tokenizer_roles",
    "require_identity",
    "require_pair",
    "scenario",
    "table_identity",
]
__getattr__, __dir__ = attach(__name__, _SOURCES)
