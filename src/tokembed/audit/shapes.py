"""Shape ledger: named tensor shapes along the input path, with symbolic dimensions bound once.

A correct last dimension is necessary but not sufficient: a transposed head
``[d_model, V]`` or a row axis renamed from ``L`` to ``T`` keeps every tensor
well formed while breaking what the rows mean. The ledger records each named
stage (``ids [B, L]`` → ``table [V, d_model]`` → ``rows [B, L, d_model]`` …) with
the symbols of its axes. The first entry that uses a symbol binds it; every later
use must have the same size, so a ``[576, 49152]`` tensor recorded as
``(V, d_model)`` after the table bound ``V = 49152`` is refused on the spot.
Two ledgers (a model's against the one it declares, or two runs) are compared
entry by entry and the first disagreement is named.

Example::

    >>> ledger = ShapeLedger()
    >>> ledger.record("ids", (2, 7), ("B", "L"))
    >>> ledger.record("table", (49152, 576), ("V", "d_model"))
    >>> ledger.record("rows", (2, 7, 576), ("B", "L", "d_model"))
    >>> ledger.dims
    {'B': 2, 'L': 7, 'V': 49152, 'd_model': 576}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokembed.errors import AuditError, UsageError

__all__ = ["LedgerDifference", "LedgerEntry", "ShapeLedger"]

Dim = str | int


@dataclass(frozen=True, kw_only=True)
class LedgerEntry:
    """One named stage: its axes' symbols (or fixed sizes) and the observed shape.

    ``shape`` is None for an entry that is only declared (an expected ledger).
    """

    name: str
    dims: tuple[Dim, ...]
    shape: tuple[int, ...] | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dims": list(self.dims), "shape": _list(self.shape)}


def _list(shape: tuple[int, ...] | None) -> list[int] | None:
    return None if shape is None else list(shape)


@dataclass(frozen=True, kw_only=True)
class LedgerDifference:
    """The first entry where two ledgers disagree, and how (``missing``, ``dims``, ``shape``)."""

    name: str
    kind: str
    left: LedgerEntry | None
    right: LedgerEntry | None
    detail: str


def _shape_of(tensor_or_shape: Any) -> tuple[int, ...]:
    shape = getattr(tensor_or_shape, "shape", tensor_or_shape)
    try:
        return tuple(int(s) for s in shape)
    except TypeError:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"a ledger records a tensor or a shape, got {type(tensor_or_shape).__name__}",
            value=type(tensor_or_shape).__name__,
            fix="pass the tensor itself or its .shape",
        ) from None


class ShapeLedger:
    """Ordered named shapes with symbolic dimensions; see the module docstring.

    Raises (from :meth:`record` and :meth:`bind`):
        AuditError LEDGER_DIMENSION_CONFLICT: a symbol bound to another size, or a rank
            that differs from the entry's symbols.
        UsageError INVALID_ARGUMENT: a name recorded twice.
    """

    def __init__(self) -> None:
        self._entries: dict[str, LedgerEntry] = {}
        self._dims: dict[str, int] = {}
        self._bound_by: dict[str, str] = {}

    # --- building -----------------------------------------------------------
    def bind(self, **dims: int) -> None:
        """Bind symbols to sizes known before any tensor (``V`` and ``d_model`` from a config)."""
        for symbol, size in dims.items():
            self._bind(symbol, int(size), where="bind()", name="bind()")

    def _bind(self, symbol: str, size: int, *, where: str, name: str) -> None:
        bound = self._dims.get(symbol)
        if bound is None:
            self._dims[symbol] = size
            self._bound_by[symbol] = name
        elif bound != size:
            raise AuditError(
                "LEDGER_DIMENSION_CONFLICT",
                f"{where}: {symbol} = {size}, but {self._bound_by[symbol]} bound {symbol} = {bound}"
                " (a transposed or swapped axis keeps every shape well formed)",
                value=(name, symbol, bound, size),
                fix=f"check the axis order of {name!r}; each symbol names one size per ledger",
            )

    def _check_new(self, name: str) -> None:
        if name in self._entries:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"the ledger already records {name!r}",
                value=name,
                fix="give each stage its own name",
            )

    def record(self, name: str, tensor_or_shape: Any, dims: Sequence[Dim]) -> None:
        """Record ``name`` with the shape of ``tensor_or_shape`` under the symbols ``dims``.

        An ``int`` in ``dims`` is a fixed size; a ``str`` is a symbol (bound here if new).
        """
        self._check_new(name)
        shape, dims_t = _shape_of(tensor_or_shape), tuple(dims)
        where = f"{name} {list(shape)} as {list(dims_t)}"
        if len(shape) != len(dims_t):
            raise AuditError(
                "LEDGER_DIMENSION_CONFLICT",
                f"{where}: rank {len(shape)} against {len(dims_t)} declared axes",
                value=(name, len(shape), len(dims_t)),
                fix=f"record {name!r} with one symbol per axis",
            )
        for dim, size in zip(dims_t, shape, strict=True):
            if isinstance(dim, int) and dim != size:
                raise AuditError(
                    "LEDGER_DIMENSION_CONFLICT",
                    f"{where}: a fixed axis of size {dim} has size {size}",
                    value=(name, dim, size),
                    fix=f"check the axis order of {name!r}",
                )
            if isinstance(dim, str):
                self._bind(dim, size, where=where, name=name)
        self._entries[name] = LedgerEntry(name=name, dims=dims_t, shape=shape)

    def expect(self, name: str, dims: Sequence[Dim]) -> None:
        """Declare ``name`` with axes ``dims`` and no observed shape (an expected ledger)."""
        self._check_new(name)
        self._entries[name] = LedgerEntry(name=name, dims=tuple(dims), shape=None)

    @classmethod
    def declared(cls, entries: Mapping[str, Sequence[Dim]], **dims: int) -> ShapeLedger:
        """A ledger of expected entries (``{"ids": ("B", "L"), ...}``) and bound symbols."""
        ledger = cls()
        ledger.bind(**dims)
        for name, axes in entries.items():
            ledger.expect(name, axes)
        return ledger

    # --- reading ------------------------------------------------------------
    @property
    def dims(self) -> dict[str, int]:
        """Symbol → bound size, in binding order."""
        return dict(self._dims)

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries.values())

    def __getitem__(self, name: str) -> LedgerEntry:
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def compare(self, other: ShapeLedger) -> LedgerDifference | None:
        """The first entry (in this ledger's order, then ``other``'s) where the two disagree.

        Entries are compared by name: present in both, the same symbols axis by axis,
        and the same shape where both observed one; then the symbols both bound must
        have equal sizes. None when they agree.
        """
        for name, mine in self._entries.items():
            theirs = other._entries.get(name)
            if theirs is None:
                return LedgerDifference(
                    name=name, kind="missing", left=mine, right=None,
                    detail=f"{name!r} is recorded on the left only",
                )  # fmt: skip
            if mine.dims != theirs.dims:
                axis = next(
                    (
                        i
                        for i, (a, b) in enumerate(zip(mine.dims, theirs.dims, strict=False))
                        if a != b
                    ),
                    min(len(mine.dims), len(theirs.dims)),
                )
                return LedgerDifference(
                    name=name, kind="dims", left=mine, right=theirs,
                    detail=f"{name!r} axis {axis}: {list(mine.dims)} against {list(theirs.dims)}",
                )  # fmt: skip
            if mine.shape is not None and theirs.shape is not None and mine.shape != theirs.shape:
                return LedgerDifference(
                    name=name, kind="shape", left=mine, right=theirs,
                    detail=f"{name!r}: {list(mine.shape)} against {list(theirs.shape)}",
                )  # fmt: skip
        for name, theirs in other._entries.items():
            if name not in self._entries:
                return LedgerDifference(
                    name=name, kind="missing", left=None, right=theirs,
                    detail=f"{name!r} is recorded on the right only",
                )  # fmt: skip
        for symbol, size in self._dims.items():
            if other._dims.get(symbol, size) != size:
                return LedgerDifference(
                    name=symbol, kind="shape", left=None, right=None,
                    detail=f"{symbol} = {size} against {other._dims[symbol]}",
                )  # fmt: skip
        return None

    def format(self) -> str:
        """One line per entry: ``name  [dims]  [shape]``."""
        width = max((len(n) for n in self._entries), default=0)
        return "\n".join(
            f"{e.name:<{width}}  {list(e.dims)}  {'declared' if e.shape is None else list(e.shape)}"
            for e in self._entries.values()
        )

    def to_dict(self) -> dict[str, Any]:
        return {"dims": self.dims, "entries": [e.to_dict() for e in self._entries.values()]}
