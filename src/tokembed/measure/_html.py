"""Small HTML builders for the report: escaped tables, sections, the token view.

Every piece of text goes through :func:`html.escape` here; callers pass plain
strings, never markup (except the SVG produced by matplotlib, see ``report.py``).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["CSS", "section", "table", "token_spans"]

# Six light background colours cycled per token; adjacent tokens always differ.
_COLOURS = ("#ffd6a5", "#caffbf", "#9bf6ff", "#bdb2ff", "#ffc6ff", "#fdffb6")

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:1.6em}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:1.6em}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#eef2f7}td:first-child,th:first-child{text-align:left}
.note{color:#555;font-size:13px;max-width:900px}
.tokens{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:15px;line-height:2;
white-space:pre-wrap;border:1px solid #ddd;padding:6px;margin:4px 0 12px}
.tok{border-radius:3px;padding:1px 0;margin-right:1px}
.hex{font-size:11px;color:#600;border:1px dashed #a00}
.plot svg{max-width:100%;height:auto}
code{background:#f4f4f4;padding:0 3px}
"""


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, cls: str = "") -> str:
    """An escaped ``<table>``."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    attr = f' class="{html.escape(cls)}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def section(title: str, body: str, *, anchor: str, note: str = "") -> str:
    """``<section>`` with an escaped heading and note; ``body`` is already HTML."""
    text = f'<p class="note">{html.escape(note)}</p>' if note else ""
    return (
        f'<section id="{html.escape(anchor)}"><h2>{html.escape(title)}</h2>{text}{body}</section>'
    )


def _label(piece: bytes) -> tuple[str, bool]:
    """Display text of a piece and whether it is shown as hex (not valid UTF-8 on its own)."""
    try:
        return piece.decode("utf-8"), False
    except UnicodeDecodeError:
        return "⟨" + " ".join(f"{b:02x}" for b in piece) + "⟩", True


def token_spans(ids: Sequence[int], pieces: Sequence[bytes]) -> str:
    """One coloured ``<span>`` per token; id and bytes in the ``title`` (hover).

    A piece that is partial UTF-8 (e.g. one byte of a Cyrillic letter) is shown as
    hex in a dashed box instead of a replacement character.
    """
    out = []
    for k, (i, piece) in enumerate(zip(ids, pieces, strict=True)):
        text, is_hex = _label(piece)
        title = f"id {i} · {len(piece)} byte{'s' if len(piece) != 1 else ''}: {piece.hex(' ')}"
        cls = "tok hex" if is_hex else "tok"
        colour = _COLOURS[k % len(_COLOURS)]
        out.append(
            f'<span class="{cls}" style="background:{colour}" data-id="{i}" '
            f'title="{html.escape(title)}">{html.escape(text)}</span>'
        )
    return f'<div class="tokens">{"".join(out)}</div>'
