"""Text, Markdown and HTML tables show the same cells: the adaptation table of examples/adapt_smollm2.py."""

from __future__ import annotations

from tokembed.measure.report import ReportData, render_html
from tokembed.measure.tables import AdaptationRow, adaptation_rows, format_table, markdown_table

ROWS = [
    AdaptationRow(
        initializer="mean", new_rows=64, init_seconds=0.0125, bpb_before=1.5, bpb_after=2.25,
        mean_kl=1.25e-4, max_kl=3.5e-3, new_mass=1.2e-4, flagged=60,
    ),
    AdaptationRow(
        initializer="zeros", new_rows=64, init_seconds=0.0, bpb_before=1.5, bpb_after=1.375,
        mean_kl=0.5, max_kl=2.0, new_mass=0.25, flagged=0,
    ),
]  # fmt: skip


def test_adaptation_cells() -> None:
    headers, rows = adaptation_rows(ROWS)
    assert headers[-1] == "init s"
    assert rows[0] == [
        "mean", "64", "1.500", "2.250", "+0.750", "1.25e-04", "3.50e-03", "1.20e-04", "60 / 64",
        "0.013",
    ]  # fmt: skip
    assert rows[1][4] == "-0.125"  # a lower bpb after: the change is negative
    headers, rows = adaptation_rows(ROWS, seconds=False)
    assert "init s" not in headers
    assert len(rows[0]) == len(headers)


def test_markdown_table_has_the_same_cells_as_the_text_table() -> None:
    headers, rows = adaptation_rows(ROWS, seconds=False)
    md = markdown_table(headers, rows).splitlines()
    assert md[0] == "| " + " | ".join(headers) + " |"
    assert md[1] == "|" + "---|" * len(headers)
    assert md[2] == "| " + " | ".join(rows[0]) + " |"
    assert len(md) == 2 + len(rows)
    text = format_table(headers, rows).splitlines()
    assert text[2].split() == [c for cell in rows[0] for c in cell.split()]
    assert markdown_table(["a"], [["x|y"]]).splitlines()[2] == "| x\\|y |"


def test_report_shows_the_adaptation_section_only_when_given() -> None:
    assert 'id="adapt"' not in render_html(ReportData())
    page = render_html(ReportData(adaptation=ROWS, adaptation_note="held-out <ru> text"))
    assert 'id="adapt"' in page
    assert "held-out &lt;ru&gt; text" in page  # the note is escaped like every text
    for cell in adaptation_rows(ROWS)[1][0]:
        assert f"<td>{cell}</td>" in page
