"""Patterns and special tokens of named tiktoken encodings, read without network access.

A ``.tiktoken`` rank file holds only mergeable pieces; the regex and the special
tokens live elsewhere:

* OpenAI encodings (``r50k_base``, ``cl100k_base``, ``o200k_base``,
  ``o200k_harmony``, …) are defined by constructor functions in the tiktoken
  package's ``tiktoken_ext`` plugins. Those constructors download the ranks
  first, so we run *the package's own functions* on a private copy of their
  module namespace in which the loaders of ``tiktoken.load`` return an empty
  table. That keeps tiktoken's exact strings and dicts (including computed ones
  such as harmony's 1,075 reserved names) and never mutates the real module.
* Qwen's is not in tiktoken; :data:`OWN_ENCODINGS` carries it: its pattern is
  :data:`~tokembed.tokenizer.patterns.QWEN` (Qwen's published ``tokenization_qwen.py``
  PAT_STR), its specials are numbered from the rank count 151,643: endoftext, im_start,
  im_end, extra_0 … extra_204.

Example::

    >>> spec = encoding_spec("o200k_harmony")  # doctest: +SKIP
    >>> len(spec.specials), len(set(spec.specials.values()))  # doctest: +SKIP
    (1091, 1090)
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tokembed.errors import FormatError, UsageError
from tokembed.tokenizer.patterns import QWEN

__all__ = [
    "OWN_ENCODINGS",
    "EncodingSpec",
    "encoding_spec",
    "known_encodings",
    "rank_addresses",
    "unknown_encoding",
]


@dataclass(frozen=True, kw_only=True)
class EncodingSpec:
    """What a rank file needs besides its ranks: the regex and the special tokens."""

    name: str
    pattern: str
    specials: Mapping[str, int] = field(default_factory=dict)


_QWEN_FIRST_SPECIAL = 151_643  # = number of Qwen ranks; specials follow them
_QWEN_SPECIAL_NAMES = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    *(f"<|extra_{i}|>" for i in range(205)),
)

OWN_ENCODINGS: dict[str, EncodingSpec] = {
    "qwen": EncodingSpec(
        name="qwen",
        pattern=QWEN,
        specials={n: _QWEN_FIRST_SPECIAL + k for k, n in enumerate(_QWEN_SPECIAL_NAMES)},
    ),
}


def _tiktoken_constructors(
    loader: Callable[..., dict[bytes, int]] | None = None,
) -> dict[str, Callable[[], Any]]:
    """Every constructor registered by a ``tiktoken_ext`` plugin, rebound offline.

    Inside the rebound constructors every rank loader of ``tiktoken.load`` is
    replaced by ``loader`` (default: one returning an empty table), so calling
    one reads its pattern and specials and, with a recording ``loader``, the
    addresses it would fetch ranks from.
    """
    loader = loader or _no_ranks
    try:
        import tiktoken.load
        import tiktoken_ext
    except ImportError:
        return {}
    found: dict[str, Callable[[], Any]] = {}
    for info in pkgutil.iter_modules(tiktoken_ext.__path__, "tiktoken_ext."):
        module = importlib.import_module(info.name)
        constructors = getattr(module, "ENCODING_CONSTRUCTORS", None)
        if not isinstance(constructors, dict):
            continue
        namespace = dict(vars(module))
        for key, value in namespace.items():
            # Anything that fetches or reads rank files answers with an empty table.
            if callable(value) and getattr(value, "__module__", None) == tiktoken.load.__name__:
                namespace[key] = loader
        for key, value in list(namespace.items()):
            if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
                namespace[key] = types.FunctionType(
                    value.__code__, namespace, value.__name__, value.__defaults__, value.__closure__
                )
        for enc_name, ctor in constructors.items():
            if isinstance(ctor, types.FunctionType) and ctor.__name__ in namespace:
                found.setdefault(enc_name, namespace[ctor.__name__])
    return found


def _no_ranks(*_args: object, **_kwargs: object) -> dict[bytes, int]:
    return {}


def rank_addresses(name: str) -> list[str]:
    """The addresses tiktoken's constructor for ``name`` reads ranks from (no network)."""
    seen: list[str] = []

    def record(*args: object, **kwargs: object) -> dict[bytes, int]:
        seen.extend(v for v in (*args, *kwargs.values()) if isinstance(v, str) and "://" in v)
        return {}

    ctor = _tiktoken_constructors(record).get(name)
    if ctor is not None:
        # A plugin that needs more than ranks to run offline simply yields no addresses.
        with contextlib.suppress(Exception):
            ctor()
    return seen


def unknown_encoding(name: str) -> UsageError:
    """The UNKNOWN_ENCODING error for ``name``, listing the names known here."""
    import difflib

    known = known_encodings()
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return UsageError(
        "UNKNOWN_ENCODING",
        f"unknown encoding name {name!r}",
        value=name,
        fix=f"{hint}known: {', '.join(known)} (tiktoken's need `pip install tiktoken`)",
    )


def known_encodings() -> list[str]:
    """Names :func:`encoding_spec` accepts here (tiktoken's depend on it being installed)."""
    return sorted({*OWN_ENCODINGS, *_tiktoken_constructors()})


def encoding_spec(name: str) -> EncodingSpec:
    """Pattern and specials of the named encoding.

    Raises:
        UsageError(UNKNOWN_ENCODING): the name is unknown (or tiktoken is not installed).
        FormatError(UNSUPPORTED_TOKENIZER): the plugin's constructor does not run offline.
    """
    if name in OWN_ENCODINGS:
        return OWN_ENCODINGS[name]
    ctor = _tiktoken_constructors().get(name)
    if ctor is None:
        raise unknown_encoding(name)
    try:
        made = ctor()
        pattern, specials = made["pat_str"], made["special_tokens"]
    except Exception as exc:  # a plugin we cannot run offline; report, do not guess
        raise FormatError(
            "UNSUPPORTED_TOKENIZER",
            f"tiktoken's constructor for {name!r} could not be read offline: {exc!r}",
            value=name,
            fix="write a sidecar JSON with pat_str and special_tokens beside the rank file",
        ) from exc
    return EncodingSpec(name=name, pattern=str(pattern), specials=dict(specials))
