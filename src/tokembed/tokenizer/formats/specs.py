"""Tokenizer specs: one string that names a tokenizer, as ``-t`` and ``inspect`` take it.

A spec is a file or folder :func:`~tokembed.tokenizer.formats.load.load_tokenizer` reads,
a tiktoken encoding name (``o200k_base``), or either followed by ``@ENCODING``: the
encoding whose pattern and special tokens a rank file is read with
(``o200k_base.tiktoken@o200k_harmony``, ``o200k_base@o200k_harmony``). A spec that exists
as written is never split, so a file whose name holds an ``@`` is still that file.

Example::

    >>> split_spec("o200k_base.tiktoken@o200k_harmony")
    ('o200k_base.tiktoken', 'o200k_harmony')
    >>> split_spec("o200k_base")
    ('o200k_base', None)
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["split_spec"]


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"PATH@ENC"`` → ``("PATH", "ENC")`` unless ``spec`` itself exists; else ``(spec, None)``.

    Both sides must be non-empty (``"a@"`` and ``"@b"`` are not split); ``PATH`` need not
    exist (an encoding name is not a path), and the last ``@`` splits.
    """
    if "@" in spec and not Path(spec).exists():
        head, enc = spec.rsplit("@", 1)
        if head and enc:
            return head, enc
    return spec, None
