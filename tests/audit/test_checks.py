"""One audit line reads as a checklist entry: ok and skip lines say what was seen, FAIL lines
lead with the code; the JSON form keeps code and detail for every check."""

from __future__ import annotations

from tokembed.audit.checks import AuditReport, Check


def _report() -> AuditReport:
    return AuditReport(
        subject="toy",
        checks=(
            Check(name="address hash", code="ADDRESS_HASH_MISMATCH", passed=True,
                  skipped=True, detail="no hash recorded; nothing to compare"),
            Check(name="vocab rows", code="VOCAB_BELOW_ID_RANGE", passed=True,
                  detail="|I|=8, R=8, V=8", value=(8, 8, 8)),
            Check(name="bos id", code="SPECIAL_ID_MISMATCH", passed=False,
                  detail="the config's bos id 9 is not a special token", value=9),
        ),
    )  # fmt: skip


def test_ok_lines_say_what_was_verified_and_fail_lines_the_code() -> None:
    assert _report().format().splitlines() == [
        "skip  address hash  no hash recorded; nothing to compare",
        "ok    vocab rows    |I|=8, R=8, V=8",
        "FAIL  bos id        SPECIAL_ID_MISMATCH: the config's bos id 9 is not a special token",
        "toy: 1 of 3 checks fail",
    ]
    assert _report().checks[1].line() == "ok    vocab rows  |I|=8, R=8, V=8"


def test_json_keeps_the_code_and_the_detail_of_every_check() -> None:
    data = _report().to_dict()
    assert [(c["status"], c["code"], c["detail"]) for c in data["checks"]] == [
        ("skip", "ADDRESS_HASH_MISMATCH", "no hash recorded; nothing to compare"),
        ("ok", "VOCAB_BELOW_ID_RANGE", "|I|=8, R=8, V=8"),
        ("FAIL", "SPECIAL_ID_MISMATCH", "the config's bos id 9 is not a special token"),
    ]
    assert data["failed_codes"] == ["SPECIAL_ID_MISMATCH"]
    assert data["checks"][1]["value"] == [8, 8, 8]
