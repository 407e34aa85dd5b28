"""The HTML report in headless Chromium: layout at 900 and 1400 px, DOM content, screenshots.

A copy of the page gets a probe script (the report itself has none) that measures
the layout in the browser and writes the result into the DOM that ``--dump-dom``
prints. Screenshots at both widths are written next to the page.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_report import report_data

from tokembed.measure.report import write_report

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

_PROBE = """<script>
const box = (e) => e.getBoundingClientRect();
const scrolls = [...document.querySelectorAll('.scroll')];
const views = [...document.querySelectorAll('.view')];
const probe = {
  viewport: window.innerWidth,
  pageWidth: document.documentElement.scrollWidth,
  scrollRights: scrolls.map((e) => Math.ceil(box(e).right)),
  scrolling: scrolls.filter((e) => e.scrollWidth > e.clientWidth).length,
  tables: document.querySelectorAll('table').length,
  sideBySide: views.map((v) => box(v.children[0]).top === box(v.children[1]).top
                                && box(v.children[0]).right <= box(v.children[1]).left),
  sources: [...document.querySelectorAll('pre.source')].map((e) => e.textContent),
  tokens: document.querySelectorAll('.tok').length,
  hex: document.querySelectorAll('.tok .hex').length,
  svgWidth: Math.ceil(box(document.querySelector('.plot svg')).right),
  tops: ['.headline', '#metrics', '#curve', '#corpora'].map((s) => box(document.querySelector(s)).top),
  filesOpen: document.querySelector('details.files').open,
  filesExtra: box(document.querySelector('details.files')).height
              - box(document.querySelector('details.files summary')).height,
  summaryRight: Math.ceil(box(document.querySelector('details.files summary')).right),
};
document.body.setAttribute('data-probe', JSON.stringify(probe));
</script>"""


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        reason = "Debian `chromium` is not installed (the Makefile's test target installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return exe


def _run(exe: str, tmp_path: Path, width: int, *args: str) -> str:
    profile = f"--user-data-dir={tmp_path / f'profile{width}'}"
    proc = subprocess.run(
        [exe, *_FLAGS, profile, f"--window-size={width},2400", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("width", [900, 1400])
def test_chromium_layout_content_and_screenshot(tmp_path: Path, width: int) -> None:
    import matplotlib.image

    exe = _chromium()
    page = write_report(report_data(), tmp_path / "report.html")
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text("utf-8").replace("</body>", _PROBE + "</body>"), "utf-8")
    dom = _run(exe, tmp_path, width, "--dump-dom", probed.resolve().as_uri())
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found is not None, dom[:500]
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["viewport"] == width
    assert probe["pageWidth"] <= width  # no sideways scrolling of the page itself
    assert all(right <= width for right in probe["scrollRights"])
    assert probe["svgWidth"] <= width
    if width == 900:
        assert probe["scrolling"] >= 1  # the wide tables scroll inside their boxes
    assert probe["tables"] == 6  # corpora, files, metrics, curve, vocab, memory
    # Results first: headline, metrics, curve, then the corpora; the file list is folded.
    assert probe["tops"] == sorted(probe["tops"])
    assert probe["tops"][0] < 200  # the headline is on the first screen
    assert (probe["filesOpen"], probe["filesExtra"]) == (False, 0)  # only the summary shows
    assert probe["summaryRight"] <= width  # its digest wraps inside the page
    assert all(probe["sideBySide"])  # each sample's text beside its tokens
    assert probe["sources"][0] == 'Привет, <b>мир</b> & "друзья" 🚀'
    assert probe["tokens"] > 20
    assert '<table class="metrics">' in dom
    assert "<path" in dom  # plotted lines
    assert "ru1024" in dom
    shot = tmp_path / f"report-{width}.png"
    _run(exe, tmp_path, width, f"--screenshot={shot}", page.resolve().as_uri())
    pixels = matplotlib.image.imread(str(shot))[..., :3]
    assert pixels.shape[:2] == (2400, width)
    non_white = float(np.mean(pixels.min(axis=2) < 0.95))
    assert non_white > 0.05  # text, table borders, plot lines and coloured tokens
    assert float(pixels.std()) > 0.05
