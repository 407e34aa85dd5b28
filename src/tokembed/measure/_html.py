"""Small HTML builders for the report: escaped tables, sections, the token view.

Every piece of text goes through :func:`html.escape` here; callers pass plain
strings, never markup (except the SVG produced by matplotlib, see ``report.py``).
"""

from __future__ import annotations

import codecs
import html
from collections.abc import Sequence

__all__ = ["CSS", "scroll", "section", "table", "token_spans", "token_view"]

# Six light background colours cycled per token; adjacent tokens always differ.
_COLOURS = ("#ffd6a5", "#caffbf", "#9bf6ff", "#bdb2ff", "#ffc6ff", "#fdffb6")

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;
max-width:1200px}
h1{font-size:1.6em}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:1.6em}
h3{font-size:1.05em;margin:14px 0 4px}
.scroll{overflow-x:auto;max-width:100%;margin:8px 0 16px;border-left:1px solid #eee}
table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#eef2f7;position:sticky;top:0}td:first-child,th:first-child{text-align:left}
.note{color:#555;font-size:13px;max-width:900px}
.view{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,2fr);gap:12px;
align-items:start;margin:4px 0 12px}
@media (max-width:720px){.view{grid-template-columns:minmax(0,1fr)}}
.source,.tokens{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:15px;
line-height:2;white-space:pre-wrap;overflow-wrap:anywhere;border:1px solid #ddd;padding:6px;
margin:0}
.source{background:#f8f8f8}
.caption{font-size:11px;color:#666;text-transform:uppercase;letter-spacing:.05em}
.tok{border-radius:3px;padding:1px 0;margin-right:1px}
.hex{font-size:11px;color:#600;border:1px dashed #a00;border-radius:2px}
ruby.chars rt{font-size:12px;color:#036;font-weight:600}
.plot svg{max-width:100%;height:auto}
code{background:#f4f4f4;padding:0 3px}
.headline{font-size:15px;max-width:900px;border-left:4px solid #4a7bd0;padding:2px 12px;
margin:8px 0 16px;background:#f6f9fe}.headline ul{margin:4px 0;padding-left:20px}
details.files summary{cursor:pointer;font-size:13px;overflow-wrap:anywhere}
"""


def scroll(inner: str) -> str:
    """Wrap already-escaped HTML (a wide table) in a box that scrolls sideways."""
    return f'<div class="scroll">{inner}</div>'


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


def _segments(piece: bytes) -> list[tuple[str, bool]]:
    """A piece as (text, is_hex) runs: text wherever its bytes decode, hex for the bytes of
    a character the piece holds only part of (a byte-level token may split a letter)."""
    out: list[tuple[str, bool]] = []
    rest = piece
    while rest:
        try:
            out.append((rest.decode("utf-8"), False))
            break
        except UnicodeDecodeError as exc:
            if exc.start:
                out.append((rest[: exc.start].decode("utf-8"), False))
            bad = rest[exc.start : exc.end]
            out.append(("⟨" + " ".join(f"{b:02x}" for b in bad) + "⟩", True))
            rest = rest[exc.end :]
    return out


def _groups(pieces: Sequence[bytes]) -> list[range]:
    """Runs of consecutive tokens that end on a character boundary.

    A byte-level token can hold part of a character (``П`` is d0 9f: two tokens);
    such tokens are grouped until the character is complete, so the group's text
    can be shown above their hex. A byte that can never start a character ends its
    group at once.
    """
    out: list[range] = []
    decoder = codecs.getincrementaldecoder("utf-8")()
    start = 0
    for k, piece in enumerate(pieces):
        try:
            decoder.decode(piece)
            pending = decoder.getstate()[0]
        except UnicodeDecodeError:
            decoder.reset()
            pending = b""
        if not pending:
            out.append(range(start, k + 1))
            start = k + 1
    if start < len(pieces):
        out.append(range(start, len(pieces)))
    return out


def token_spans(ids: Sequence[int], pieces: Sequence[bytes]) -> str:
    """One coloured ``<span class="tok">`` per token; id and bytes in the ``title`` (hover).

    A piece is shown as the text it decodes to; only bytes that belong to a
    character the piece holds part of (e.g. one byte of a Cyrillic letter) are shown
    as hex in a dashed box, never as a replacement character. Tokens that together
    spell whole characters are grouped in a ``<ruby>`` whose annotation is that text.
    """
    spans = []
    for k, (i, piece) in enumerate(zip(ids, pieces, strict=True)):
        title = f"id {i} · {len(piece)} byte{'s' if len(piece) != 1 else ''}: {piece.hex(' ')}"
        inner = "".join(
            f'<span class="hex">{html.escape(t)}</span>' if is_hex else html.escape(t)
            for t, is_hex in _segments(piece)
        )
        colour = _COLOURS[k % len(_COLOURS)]
        spans.append(
            f'<span class="tok" style="background:{colour}" data-id="{i}" '
            f'title="{html.escape(title)}">{inner}</span>'
        )
    out = []
    for group in _groups(pieces):
        joined = b"".join(pieces[k] for k in group)
        members = "".join(spans[k] for k in group)
        try:
            text = joined.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if len(group) > 1 and text:
            out.append(f'<ruby class="chars">{members}<rt>{html.escape(text)}</rt></ruby>')
        else:
            out.append(members)
    return f'<div class="tokens">{"".join(out)}</div>'


def token_view(text: str, ids: Sequence[int], pieces: Sequence[bytes]) -> str:
    """The source ``text`` beside its tokens (stacked on narrow windows)."""
    return (
        '<div class="view"><div><div class="caption">text</div>'
        f'<pre class="source">{html.escape(text)}</pre></div>'
        f'<div><div class="caption">{len(ids)} tokens</div>{token_spans(ids, pieces)}</div></div>'
    )
