"""Declarative tables mapping Hugging Face ``tokenizer.json`` components to tokembed.

Each component ``type`` we can represent lists the keys it may carry: keys
with a required value (anything else changes the encoding in a way tokembed
cannot reproduce) and keys whose value does not matter to ids. A type or key
not listed is refused with an error naming it, so a new HF feature never
loads silently wrong.

Pre-tokenizers become regex stages (isolated splitting, as HF's ``Split``):

=============================================  ===============================
HF                                             stages
=============================================  ===============================
``ByteLevel`` (``use_regex`` true)             GPT-2's regex (preset gpt2-hf)
``ByteLevel`` (``use_regex`` false)            none (byte spelling only)
``Split`` (``Regex``/``String``, Isolated)     the regex (``from_onig``) / escaped
``Digits`` (``individual_digits``)             ``\\p{N}`` (or ``\\p{N}+``)
``Sequence``                                   the members' stages in order
=============================================  ===============================

Rust's ``char::is_numeric`` (HF ``Digits``) is Unicode N = Nd|Nl|No, which
is exactly ``\\p{N}`` in the ``regex`` module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import regex

from tokembed.errors import FormatError
from tokembed.tokenizer.oniguruma import from_onig
from tokembed.tokenizer.patterns import PATTERNS

__all__ = ["TOP_LEVEL_KEYS", "check_component", "pretokenizer_stages"]


@dataclass(frozen=True)
class _Rule:
    """Keys a component may have: fixed values (any of a tuple) and free keys."""

    required: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    free: frozenset[str] = frozenset()


TOP_LEVEL_KEYS = frozenset(
    {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer"}
    | {"post_processor", "decoder", "model"}
)

_RULES: dict[str, dict[str | None, _Rule]] = {
    "normalizer": {None: _Rule()},
    "pre_tokenizer": {
        "ByteLevel": _Rule(
            {"add_prefix_space": (False,)}, frozenset({"trim_offsets", "use_regex"})
        ),
        "Split": _Rule({"behavior": ("Isolated",), "invert": (False,)}, frozenset({"pattern"})),
        "Digits": _Rule(free=frozenset({"individual_digits"})),
        "Sequence": _Rule(free=frozenset({"pretokenizers"})),
    },
    "decoder": {
        None: _Rule(),
        "ByteLevel": _Rule(free=frozenset({"add_prefix_space", "trim_offsets", "use_regex"})),
    },
    "post_processor": {
        None: _Rule(),
        "ByteLevel": _Rule(free=frozenset({"add_prefix_space", "trim_offsets", "use_regex"})),
        # A template that adds no special token leaves ids unchanged (SmolLM2's).
        "TemplateProcessing": _Rule({"special_tokens": ({},)}, frozenset({"single", "pair"})),
    },
    "model": {
        "BPE": _Rule(
            {
                "dropout": (None,),
                "continuing_subword_prefix": (None, ""),
                "end_of_word_suffix": (None, ""),
                "byte_fallback": (False,),
                "ignore_merges": (False, True),
            },
            frozenset({"vocab", "merges", "unk_token", "fuse_unk"}),
        )
    },
    "added_token": {
        None: _Rule(
            {"single_word": (False,), "lstrip": (False,), "rstrip": (False,), "special": (True,)},
            frozenset({"id", "content", "normalized"}),
        )
    },
}


def _unsupported(source: str, what: str, value: object) -> FormatError:
    return FormatError(
        "UNSUPPORTED_TOKENIZER",
        f"{source}: {what}",
        value=value,
        fix="tokembed reads byte-level BPE without normalizers; convert or export it from the original",
    )


def check_component(kind: str, node: Any, source: str) -> str | None:
    """Validate ``node`` (a dict or None) against the table for ``kind``; returns its type.

    Raises:
        FormatError(UNSUPPORTED_TOKENIZER): unknown type, unknown key or unsupported value.
    """
    rules = _RULES[kind]
    if node is None:
        if None not in rules:
            raise _unsupported(source, f"{kind} is missing", None)
        return None
    if not isinstance(node, dict):
        raise _unsupported(source, f"{kind} must be an object", type(node).__name__)
    kind_type = node.get("type") if kind != "added_token" else None
    if not isinstance(kind_type, str | None) or kind_type not in rules:  # a list is unhashable
        raise _unsupported(source, f"{kind} type {kind_type!r} is not supported", kind_type)
    rule = rules[kind_type]
    for key, value in node.items():
        if key == "type" or key in rule.free:
            continue
        if key not in rule.required:
            raise _unsupported(source, f"{kind} {kind_type or ''} has unknown key {key!r}", key)
        if value not in rule.required[key]:
            raise _unsupported(
                source, f"{kind} {kind_type or ''} key {key!r} = {value!r} is not supported", value
            )
    return kind_type


def _split_stage(node: Mapping[str, Any], source: str) -> list[str]:
    pattern = node.get("pattern")
    if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
        return [from_onig(pattern["Regex"])]
    if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        return [regex.escape(pattern["String"])]
    raise _unsupported(source, "Split pattern must be {'Regex': ...} or {'String': ...}", pattern)


def _byte_level_stage(node: Mapping[str, Any], source: str) -> list[str]:
    return [PATTERNS["gpt2-hf"]] if node.get("use_regex", True) else []


def _digits_stage(node: Mapping[str, Any], source: str) -> list[str]:
    return [r"\p{N}"] if node.get("individual_digits", False) else [r"\p{N}+"]


def _sequence_stages(node: Mapping[str, Any], source: str) -> list[str]:
    members = node.get("pretokenizers")
    if not isinstance(members, list):
        raise _unsupported(source, "Sequence needs a list under 'pretokenizers'", members)
    for k, member in enumerate(members[:-1]):
        if isinstance(member, dict) and member.get("type") == "ByteLevel":
            # Later members would see GPT-2 byte spellings instead of text.
            raise _unsupported(source, f"ByteLevel is member #{k}, not last, of a Sequence", k)
    return [stage for member in members for stage in _stages(member, source)]


_STAGES: dict[str, Callable[[Mapping[str, Any], str], list[str]]] = {
    "ByteLevel": _byte_level_stage,
    "Split": _split_stage,
    "Digits": _digits_stage,
    "Sequence": _sequence_stages,
}


def _stages(node: Any, source: str) -> list[str]:
    kind_type = check_component("pre_tokenizer", node, source)
    assert kind_type is not None  # pre_tokenizer rules have no None entry
    return _STAGES[kind_type](node, source)


def _has_byte_level(node: Any) -> bool:
    if node.get("type") == "ByteLevel":
        return True
    return (
        node.get("type") == "Sequence"
        and bool(node["pretokenizers"])
        and _has_byte_level(node["pretokenizers"][-1])
    )


_WHOLE_TEXT = r"[\s\S]+"  # one chunk; this spelling means the same in Oniguruma (HF)


def pretokenizer_stages(node: Any, source: str) -> list[str]:
    """Regex stages equal to HF's pre-tokenizer ``node``, which must end in ByteLevel.

    Raises:
        FormatError(UNSUPPORTED_TOKENIZER): unknown type/key, or no ByteLevel step
            (the vocabulary would not be byte-level).
    """
    stages = _stages(node, source)
    if not _has_byte_level(node):
        raise _unsupported(source, "pre_tokenizer has no final ByteLevel step", node.get("type"))
    # ByteLevel without a regex and nothing before it: the whole text is one chunk.
    return stages or [_WHOLE_TEXT]
