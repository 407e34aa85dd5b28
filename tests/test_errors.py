"""The error registry is exact: every code raised in src/ is registered, and every registered code is raised."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from tokembed.errors import (
    BUILTIN_OF,
    CODES,
    DisallowedSpecialError,
    EmbeddingError,
    TokembedError,
    TokenizerError,
    UnknownTokenError,
    UsageError,
    require_choice,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "tokembed"
_RAISED = re.compile(r"""Error\(\s*["']([A-Z][A-Z0-9_]+)["']""")


def _raised_codes() -> set[str]:
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        found.update(_RAISED.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_raised_code_is_registered() -> None:
    assert _raised_codes() - set(CODES) == set()


def test_every_registered_code_is_used_somewhere() -> None:
    # Some codes reach the constructor through a helper (e.g. a `_refuse(code, ...)`),
    # so any quoted occurrence outside the registry counts as a use.
    text = "\n".join(
        p.read_text(encoding="utf-8") for p in SRC.rglob("*.py") if p.name != "errors.py"
    )
    assert {code for code in CODES if f'"{code}"' not in text} == set()


def test_error_carries_code_value_and_fix() -> None:
    err = UsageError("FILE_NOT_FOUND", "no such corpus", value="x.txt", fix="check the path")
    assert (err.code, err.value, err.exit_code) == ("FILE_NOT_FOUND", "x.txt", 2)
    assert str(err) == "FILE_NOT_FOUND: no such corpus — check the path"
    assert isinstance(err, TokembedError)


def test_require_choice_names_what_was_asked_and_the_value() -> None:
    require_choice("bare", ("space", "bare"), "leading-space policy", fix="use 'space'")
    with pytest.raises(UsageError) as err:
        require_choice("tab", ("space", "bare"), "leading-space policy", fix="use 'space'")
    assert (err.value.code, err.value.value, err.value.fix) == (
        "INVALID_ARGUMENT",
        "tab",
        "use 'space'",
    )
    assert err.value.message == "unknown leading-space policy 'tab'"
    assert isinstance(err.value, ValueError)


def test_unregistered_code_is_an_internal_bug() -> None:
    with pytest.raises(AssertionError):
        TokembedError("NO_SUCH_CODE", "x")


_RAISED_AS = re.compile(r"""\b(\w+Error)\(\s*["']([A-Z][A-Z0-9_]+)["']""")
# Raised by the sharded tables in parallel/ as ParallelError while the embedding contract
# raises them as EmbeddingError; they leave this set when parallel/ raises the
# embedding contract's own errors.
_PENDING_TWO_CLASSES: set[str] = set()


def _classes_by_code() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for cls, code in _RAISED_AS.findall(path.read_text(encoding="utf-8")):
            found.setdefault(code, set()).add(cls)
    return found


def test_one_code_one_class() -> None:
    shared = {c: k for c, k in _classes_by_code().items() if len(k) > 1}
    assert set(shared) - _PENDING_TWO_CLASSES == set(), shared


def test_every_measure_code_is_a_measure_error() -> None:
    # `except MeasureError` catches every failure of reading text and measuring it.
    text = (SRC / "errors.py").read_text(encoding="utf-8")
    section = text.split("# --- measure")[1].split("# ---")[0]
    measure_codes = set(re.findall(r'"([A-Z][A-Z0-9_]+)":', section))
    assert {"EMPTY_INPUT", "INPUT_NOT_UTF8", "UNREADABLE_INPUT"} <= measure_codes
    classes = _classes_by_code()
    assert {c: classes[c] for c in measure_codes if classes[c] != {"MeasureError"}} == {}


def test_distributed_agreement_reraises_under_the_one_class() -> None:
    # When one rank refuses its input, the others raise the same code under its class.
    from tokembed.parallel.collectives import _AGREED

    classes = _classes_by_code()
    for code, cls in _AGREED.items():
        if code not in _PENDING_TWO_CLASSES:
            assert classes.get(code, {cls.__name__}) == {cls.__name__}, code


@pytest.mark.parametrize(("code", "builtin"), sorted(BUILTIN_OF.items()))
def test_coded_error_is_also_the_builtin_torch_or_tiktoken_raises(
    code: str, builtin: type[Exception]
) -> None:
    family = {"INVALID_ARGUMENT": UsageError}.get(code, EmbeddingError)
    if code in {"SPECIAL_TOKEN_DISALLOWED", "UNKNOWN_TOKEN_ID", "UNKNOWN_PIECE"}:
        family = TokenizerError
    err = family(code, "message", value=7, fix="do this")
    assert isinstance(err, family)
    assert isinstance(err, builtin)
    assert str(err) == f"{code}: message — do this"  # KeyError's repr form does not win
    if family is not TokenizerError:  # the tokenizer's mixes have public names of their own
        assert type(err).__name__ == family.__name__  # tracebacks name the family
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), back.code, back.value, back.fix) == (type(err), code, 7, "do this")
    with pytest.raises(builtin):
        raise err


def test_builtin_mixing_reuses_the_tokenizer_public_classes() -> None:
    # One mechanism: the table decides, and the tokenizer's named classes are its entries.
    assert type(TokenizerError("UNKNOWN_TOKEN_ID", "x")) is UnknownTokenError
    assert type(TokenizerError("SPECIAL_TOKEN_DISALLOWED", "x")) is DisallowedSpecialError
    assert type(EmbeddingError("ID_OUT_OF_RANGE", "x")) is type(
        EmbeddingError("PAD_ID_INVALID", "y")
    )
    plain = EmbeddingError("GROWTH_PREFIX_CHANGED", "x")  # no built-in counterpart
    assert type(plain) is EmbeddingError
    assert set(BUILTIN_OF) <= set(CODES)


def test_also_adds_the_type_a_peer_raises_at_one_site() -> None:
    # nn.EmbeddingBag raises RuntimeError for an id outside the table where nn.Embedding
    # raises IndexError: the same code, one error that is both, through the same table.
    err = EmbeddingError("ID_OUT_OF_RANGE", "ids[0] = 9", value=9, fix="f", also=(RuntimeError,))
    assert isinstance(err, IndexError)
    assert isinstance(err, RuntimeError)
    assert type(err).__name__ == "EmbeddingError"
    assert type(err) is type(EmbeddingError("PAD_ID_INVALID", "y", also=(RuntimeError,)))
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), back.code, back.value, back.fix) == (type(err), "ID_OUT_OF_RANGE", 9, "f")
    assert isinstance(back, RuntimeError)
    plain = EmbeddingError("ID_OUT_OF_RANGE", "ids[0] = 9", value=9)
    both = plain.also_as(RuntimeError)
    assert not isinstance(plain, RuntimeError)
    assert isinstance(both, RuntimeError)
    assert isinstance(both, IndexError)
    assert (both.code, both.message, both.value, str(both)) == (
        "ID_OUT_OF_RANGE",
        "ids[0] = 9",
        9,
        str(plain),
    )
    dims = EmbeddingError("INVALID_BAG_OFFSETS", "2-D", also=(ValueError,))
    assert isinstance(dims, ValueError)
    assert isinstance(dims, RuntimeError)
