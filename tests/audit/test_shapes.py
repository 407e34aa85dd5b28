"""The shape ledger: symbols bound once, transposed and renamed axes caught, first disagreement named."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tokembed.audit import ShapeLedger
from tokembed.errors import AuditError, UsageError

V, D = 49152, 576  # SmolLM2-135M's table


def _text_ledger(length_name: str = "L") -> ShapeLedger:
    ledger = ShapeLedger()
    ledger.record("ids", (2, 7), ("B", length_name))
    ledger.record("table", (V, D), ("V", "d_model"))
    ledger.record("rows", (2, 7, D), ("B", length_name, "d_model"))
    return ledger


def test_symbols_bind_on_first_use_in_order() -> None:
    ledger = _text_ledger()
    assert ledger.dims == {"B": 2, "L": 7, "V": V, "d_model": D}
    assert [e.name for e in ledger.entries] == ["ids", "table", "rows"]
    assert ledger["rows"].shape == (2, 7, D)
    assert ledger.to_dict()["entries"][1] == {"name": "table", "dims": ["V", "d_model"],
                                              "shape": [V, D]}  # fmt: skip


def test_a_transposed_head_is_caught_where_it_is_recorded() -> None:
    ledger = _text_ledger()
    head = torch.empty(D, V, device="meta")  # stored [d_model, V]: the layout F.linear does not use
    with pytest.raises(AuditError) as e:
        ledger.record("head", head, ("V", "d_model"))
    assert e.value.code == "LEDGER_DIMENSION_CONFLICT"
    assert e.value.value == ("head", "V", V, D)
    assert "table bound V = 49152" in e.value.message
    assert "head" not in ledger  # a refused entry is not recorded


def test_rank_and_fixed_axes_are_checked() -> None:
    ledger = ShapeLedger()
    with pytest.raises(AuditError) as e:
        ledger.record("rows", (2, 7), ("B", "L", "d_model"))
    assert (e.value.code, e.value.value) == ("LEDGER_DIMENSION_CONFLICT", ("rows", 2, 3))
    ledger.record("pe", (1, 10, 8), (1, "max_len", "d_model"))
    with pytest.raises(AuditError) as e:
        ledger.record("pe2", (2, 10, 8), (1, "max_len", "d_model"))
    assert e.value.value == ("pe2", 1, 2)


def test_a_config_binds_symbols_before_any_tensor() -> None:
    ledger = ShapeLedger()
    ledger.bind(V=V, d_model=D)
    with pytest.raises(AuditError) as e:
        ledger.record("table", (48000, D), ("V", "d_model"))  # a truncated table
    assert e.value.value == ("table", "V", V, 48000)


def test_a_renamed_axis_is_the_first_disagreement() -> None:
    mine, theirs = _text_ledger("L"), _text_ledger("T")
    diff = mine.compare(theirs)
    assert diff is not None
    assert (diff.name, diff.kind) == ("ids", "dims")
    assert diff.detail == "'ids' axis 1: ['B', 'L'] against ['B', 'T']"


def test_two_runs_compare_by_shape_and_by_missing_entries() -> None:
    first, second = _text_ledger(), ShapeLedger()
    second.record("ids", (2, 9), ("B", "L"))
    diff = first.compare(second)
    assert diff is not None
    assert (diff.name, diff.kind) == ("ids", "shape")
    second = _text_ledger()
    second.record("x0", (2, 7, D), ("B", "L", "d_model"))
    diff = first.compare(second)
    assert diff is not None
    assert (diff.name, diff.kind, diff.detail) == (
        "x0",
        "missing",
        "'x0' is recorded on the right only",
    )
    assert first.compare(_text_ledger()) is None


def test_a_declared_ledger_checks_axes_and_bound_sizes() -> None:
    declared = ShapeLedger.declared(
        {"ids": ("B", "L"), "table": ("V", "d_model"), "rows": ("B", "L", "d_model")}, V=V
    )
    assert declared["rows"].shape is None
    assert _text_ledger().compare(declared) is None
    other = ShapeLedger.declared(
        {"ids": ("B", "L"), "table": ("V", "d_model"), "rows": ("B", "L", "d_model")}, V=50257
    )
    diff = _text_ledger().compare(other)
    assert diff is not None
    assert diff.detail == "V = 49152 against 50257"


def test_names_are_recorded_once() -> None:
    ledger = _text_ledger()
    with pytest.raises(UsageError) as e:
        ledger.record("ids", (2, 7), ("B", "L"))
    assert e.value.code == "INVALID_ARGUMENT"


@given(st.lists(st.integers(1, 50), min_size=2, max_size=4, unique=True), st.data())
def test_any_axis_permutation_of_distinct_sizes_is_refused(
    sizes: list[int], data: st.DataObject
) -> None:
    symbols = [f"s{i}" for i in range(len(sizes))]
    perm = data.draw(st.permutations(range(len(sizes))))
    ledger = ShapeLedger()
    ledger.record("a", tuple(sizes), symbols)
    shuffled = tuple(sizes[i] for i in perm)
    if list(perm) == sorted(perm):
        ledger.record("b", shuffled, symbols)
        assert ledger.compare(ledger) is None
    else:
        with pytest.raises(AuditError):
            ledger.record("b", shuffled, symbols)
