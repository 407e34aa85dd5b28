"""One line of an audit (:class:`Check`) and the list of them (:class:`AuditReport`).

Every check names the code it guards, whether it held, what it saw (``detail``
in words, ``value`` as data) and whether it applied at all: a check whose
evidence is absent (no address hash recorded, no weights stored) is *skipped*,
which passes but says so, instead of passing silently. A report passes when no
applicable check failed; :meth:`AuditReport.require` turns a failing report into
one :class:`~tokembed.errors.AuditError` that lists every failure.

Example::

    >>> report = AuditReport(subject="toy", checks=(
    ...     Check(name="vocab rows", code="VOCAB_BELOW_ID_RANGE", passed=False,
    ...           detail="V=8 < R=10", value=(8, 10)),))
    >>> report.failed_codes
    ('VOCAB_BELOW_ID_RANGE',)
    >>> print(report.format())
    FAIL  vocab rows  VOCAB_BELOW_ID_RANGE: V=8 < R=10
    toy: 1 of 1 checks fail
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokembed.errors import CODES, AuditError

__all__ = ["AuditReport", "Check"]


@dataclass(frozen=True, kw_only=True)
class Check:
    """One audited property: its name, the code it guards, the verdict and the evidence.

    Attributes:
        name: short stable label (``"vocab rows"``, ``"tie"``).
        code: the registered code this check reports when it fails.
        passed: True when the property holds (or the check was skipped).
        detail: one sentence on what was seen.
        value: the evidence as plain data (ids, sizes, dtype names), JSON-friendly.
        skipped: the evidence was absent, so nothing was compared.
    """

    name: str
    code: str
    passed: bool
    detail: str
    value: Any = None
    skipped: bool = False

    def __post_init__(self) -> None:
        assert self.code in CODES, f"unregistered code {self.code!r}"
        assert self.passed or not self.skipped, "a skipped check cannot fail"

    @property
    def status(self) -> str:
        """``"ok"``, ``"FAIL"`` or ``"skip"``."""
        return "skip" if self.skipped else ("ok" if self.passed else "FAIL")

    def line(self, width: int = 0) -> str:
        """One checklist line, the name padded to ``width``.

        A passing or skipped check says what was verified (or why nothing was):
        ``ok    vocab rows  |I|=8, R=8, V=8``; a failing one leads its detail with the
        code it reports: ``FAIL  vocab rows  VOCAB_BELOW_ID_RANGE: V=8 < R=10``. A code
        on an ok line would read like a failure, so only FAIL lines carry it (the JSON
        form, :meth:`to_dict`, keeps both).
        """
        said = self.detail if self.passed else f"{self.code}: {self.detail}"
        return f"{self.status:<4}  {self.name:<{width}}  {said}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "code": self.code,
            "passed": self.passed,
            "skipped": self.skipped,
            "status": self.status,
            "detail": self.detail,
            "value": _plain(self.value),
        }


def _plain(value: Any) -> Any:
    """``value`` with tuples as lists and other objects as their ``str`` (for JSON)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


@dataclass(frozen=True, kw_only=True)
class AuditReport:
    """The checks of one audit, in the order they ran.

    Attributes:
        subject: what was audited, in words (``"smollm2-135m + model/"``).
        checks: one :class:`Check` per audited property.
        ledger: the shape ledger filled on the way (see :mod:`tokembed.audit.shapes`), or None.
    """

    subject: str
    checks: tuple[Check, ...]
    ledger: Any = field(default=None, compare=False)
    partial: str | None = None  # why some checks could not run (no weights stored...)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.passed)

    @property
    def failed_codes(self) -> tuple[str, ...]:
        """Codes of the failing checks, in check order (a code repeats if two checks fail on it)."""
        return tuple(c.code for c in self.failures)

    def check(self, name: str) -> Check:
        """The check called ``name`` (KeyError when there is none)."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def format(self) -> str:
        """One checklist line per check (:meth:`Check.line`), names aligned, then a summary line."""
        width = max((len(c.name) for c in self.checks), default=0)
        lines = [c.line(width) for c in self.checks]
        bad = len(self.failures)
        if bad:
            verdict = f"{bad} of {len(self.checks)} checks fail"
        elif self.partial:  # a pass on part of the evidence is never called a full pass
            verdict = f"partial: every check that ran passes, but {self.partial}"
        else:
            verdict = "all checks pass"
        lines.append(f"{self.subject}: {verdict}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "subject": self.subject,
            "passed": self.passed,
            "failed_codes": list(self.failed_codes),
            "partial": self.partial,
            "checks": [c.to_dict() for c in self.checks],
        }
        if self.ledger is not None:
            out["ledger"] = self.ledger.to_dict()
        return out

    def require(self, code: str, *, fix: str) -> AuditReport:
        """This report when it passes; else raise ``AuditError(code)`` listing every failure.

        Raises:
            AuditError: ``code`` (PAIR_NOT_ADMITTED, INITIAL_STATE_REJECTED), with this
                report as ``value``.
        """
        if self.passed:
            return self
        listed = "; ".join(f"{c.code} ({c.name}): {c.detail}" for c in self.failures)
        raise AuditError(
            code,
            f"{self.subject}: {len(self.failures)} of {len(self.checks)} checks fail: {listed}",
            value=self,
            fix=fix,
        )
