"""Three vocabulary sizes that answer different questions: defined ids, id range, model rows.

For a tokenizer with ordinary (mergeable) ids and named special tokens:

* ``|I|`` — defined unique ids: ordinary ∪ special ids. Several special names
  may share one id (*aliases*: o200k_harmony's ``<|endofprompt|>`` and
  ``<|reserved_200018|>`` are both 200018), so names can outnumber ids;
* ``R = max(I) + 1`` — the id range from zero, holes included (``tiktoken``'s
  ``n_vocab`` reports R); *holes* are the ids in ``[0, R)`` nobody defines;
* ``V`` — the rows a model allocates (``vocab_size`` in an HF ``config.json``).
  Direct indexing needs ``V >= R``; ``V - |I|`` rows are reached by no tokenizer id.

``V`` and the model's width come from its HF ``config.json``
(:func:`tokembed.artifacts.config.read_model_config`); the table sizes they imply are
computed by :mod:`tokembed.measure.memory`, the one calculator.

Example::

    >>> s = vocab_sizes(name="toy", ordinary_ids=range(256), specials={"<a>": 300, "<b>": 300})
    >>> s.unique_ids, s.id_range, s.holes, s.aliases
    (257, 301, 44, {300: ('<a>', '<b>')})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tokembed.artifacts.config import ModelConfig
from tokembed.errors import MeasureError

if TYPE_CHECKING:
    from tokembed.tokenizer import Tokenizer

__all__ = ["VocabSizes", "vocab_sizes", "vocab_sizes_of"]


def _ranges(sorted_ids: list[int], end: int) -> list[tuple[int, int]]:
    """Inclusive ranges of [0, end) not in ``sorted_ids`` (which are unique and < end)."""
    out: list[tuple[int, int]] = []
    expect = 0
    for i in [*sorted_ids, end]:
        if i > expect:
            out.append((expect, i - 1))
        expect = i + 1
    return out


@dataclass(frozen=True, kw_only=True)
class VocabSizes:
    """Counts of one tokenizer (and optionally its model's ``V``); see module docstring."""

    name: str
    mergeable_ids: int
    special_names: int
    special_ids: int
    aliases: dict[int, tuple[str, ...]]
    unique_ids: int
    id_range: int
    holes: int
    hole_ranges: list[tuple[int, int]]
    model: ModelConfig | None = None
    address_hash: str | None = None

    @property
    def model_rows(self) -> int | None:
        """``V``: the rows the model allocates (None without a config)."""
        return None if self.model is None else self.model.vocab_size

    @property
    def config(self) -> str | None:
        """The config file ``V`` was read from."""
        return None if self.model is None else self.model.path

    @property
    def unreached_rows(self) -> int | None:
        """``V - |I|``: model rows no tokenizer id reaches (holes plus rows past R)."""
        return None if self.model_rows is None else self.model_rows - self.unique_ids

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mergeable_ids": self.mergeable_ids,
            "special_names": self.special_names,
            "special_ids": self.special_ids,
            "aliases": {str(k): list(v) for k, v in self.aliases.items()},
            "unique_ids": self.unique_ids,
            "id_range": self.id_range,
            "holes": self.holes,
            "hole_ranges": [list(r) for r in self.hole_ranges],
            "model_rows": self.model_rows,
            "unreached_rows": self.unreached_rows,
            "config": self.config,
            "hidden_size": None if self.model is None else self.model.hidden_size,
            "address_hash": self.address_hash,
        }


def vocab_sizes(
    *,
    name: str,
    ordinary_ids: Iterable[int],
    specials: Mapping[str, int],
    model: ModelConfig | None = None,
    address_hash: str | None = None,
) -> VocabSizes:
    """Sizes from ordinary ids, special name → id, and optionally the model's config (``V``).

    Raises:
        MeasureError(VOCAB_BELOW_ID_RANGE): ``model_rows < R`` (some id has no row).
    """
    ordinary = set(ordinary_ids)
    special_ids = set(specials.values())
    defined = sorted(ordinary | special_ids)
    id_range = defined[-1] + 1 if defined else 0
    by_id: dict[int, list[str]] = {}
    for sname, sid in specials.items():
        by_id.setdefault(sid, []).append(sname)
    model_rows = None if model is None else model.vocab_size
    if model_rows is not None and model_rows < id_range:
        raise MeasureError(
            "VOCAB_BELOW_ID_RANGE",
            f"{name}: the model allocates V={model_rows} rows but ids reach {id_range - 1} "
            f"(R={id_range}); ids {model_rows}..{id_range - 1} have no row",
            value=(model_rows, id_range),
            fix="pair the tokenizer with the model it belongs to, or grow the table to at least R rows",
        )
    holes = _ranges(defined, id_range)
    return VocabSizes(
        name=name,
        mergeable_ids=len(ordinary),
        special_names=len(specials),
        special_ids=len(special_ids),
        aliases={sid: tuple(sorted(n)) for sid, n in sorted(by_id.items()) if len(n) > 1},
        unique_ids=len(defined),
        id_range=id_range,
        holes=sum(b - a + 1 for a, b in holes),
        hole_ranges=holes,
        model=model,
        address_hash=address_hash,
    )


def vocab_sizes_of(
    tok: Tokenizer, *, config: ModelConfig | None = None, name: str | None = None
) -> VocabSizes:
    """:func:`vocab_sizes` of a loaded tokenizer, with ``V`` from ``config`` when given."""
    return vocab_sizes(
        name=name or tok.name or "tokenizer",
        ordinary_ids=tok.tables.pieces.keys(),
        specials=tok.tables.specials,
        model=config,
        address_hash=tok.address_hash,
    )
