"""Three vocabulary sizes that answer different questions (lecture §8.2, §9, §11.3).

For a tokenizer with ordinary (mergeable) ids and named special tokens:

* ``|I|`` — defined unique ids: ordinary ∪ special ids. Several special names
  may share one id (*aliases*: o200k_harmony's ``<|endofprompt|>`` and
  ``<|reserved_200018|>`` are both 200018), so names can outnumber ids;
* ``R = max(I) + 1`` — the id range from zero, holes included (``tiktoken``'s
  ``n_vocab`` reports R); *holes* are the ids in ``[0, R)`` nobody defines;
* ``V`` — the rows a model allocates (``vocab_size`` in an HF ``config.json``).
  Direct indexing needs ``V >= R``; ``V - |I|`` rows are reached by no tokenizer id.

:func:`embedding_memory` turns ``V`` and a width ``d`` into parameters and bytes,
tied (one ``V×d`` table) and untied (two).

Example::

    >>> s = vocab_sizes(name="toy", ordinary_ids=range(256), specials={"<a>": 300, "<b>": 300})
    >>> s.unique_ids, s.id_range, s.holes, s.aliases
    (257, 301, 44, {300: ('<a>', '<b>')})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokembed._hf_config import read_hf_config
from tokembed.errors import MeasureError, UsageError

if TYPE_CHECKING:
    from tokembed.tokenizer import Tokenizer

__all__ = [
    "EmbeddingMemory",
    "ModelConfig",
    "VocabSizes",
    "embedding_memory",
    "read_model_config",
    "vocab_sizes",
    "vocab_sizes_of",
]


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The fields of an HF ``config.json`` that the size calculations need."""

    path: str
    vocab_size: int
    hidden_size: int | None = None
    tie_word_embeddings: bool | None = None


def read_model_config(path: str | Path) -> ModelConfig:
    """``vocab_size`` (and, when present, ``hidden_size`` and tying) of an HF config.json.

    A multimodal config's ``text_config`` is read when the top level lacks ``vocab_size``.

    Raises:
        UsageError(FILE_NOT_FOUND); MeasureError(INVALID_CONFIG): not JSON or no
        positive integer ``vocab_size``.
    """
    path, data = read_hf_config(path, error=MeasureError)
    vocab = data.get("vocab_size")
    if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab <= 0:
        raise MeasureError(
            "INVALID_CONFIG",
            f"{path} has no positive integer vocab_size",
            value=vocab,
            fix="pass the model's config.json (it must state vocab_size)",
        )
    hidden = data.get("hidden_size")
    tied = data.get("tie_word_embeddings")
    return ModelConfig(
        path=str(path),
        vocab_size=vocab,
        hidden_size=hidden if isinstance(hidden, int) else None,
        tie_word_embeddings=tied if isinstance(tied, bool) else None,
    )


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
    model_rows: int | None = None
    config: str | None = field(default=None)

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
        }


def vocab_sizes(
    *,
    name: str,
    ordinary_ids: Iterable[int],
    specials: Mapping[str, int],
    model_rows: int | None = None,
    config: str | None = None,
) -> VocabSizes:
    """Sizes from ordinary ids, special name → id, and optionally the model's rows ``V``.

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
        model_rows=model_rows,
        config=config,
    )


def vocab_sizes_of(
    tok: Tokenizer, *, config: ModelConfig | None = None, name: str | None = None
) -> VocabSizes:
    """:func:`vocab_sizes` of a loaded tokenizer, with ``V`` from ``config`` when given."""
    return vocab_sizes(
        name=name or tok.name or "tokenizer",
        ordinary_ids=tok.tables.pieces.keys(),
        specials=tok.tables.specials,
        model_rows=None if config is None else config.vocab_size,
        config=None if config is None else config.path,
    )


@dataclass(frozen=True, kw_only=True)
class EmbeddingMemory:
    """Weight payload of the vocabulary tables (no gradients, optimizer state or bias)."""

    name: str
    rows: int
    width: int

    @property
    def table_parameters(self) -> int:
        """One ``V×d`` table."""
        return self.rows * self.width

    @property
    def tied_parameters(self) -> int:
        """Input and output share one table: ``V·d``."""
        return self.table_parameters

    @property
    def untied_parameters(self) -> int:
        """Separate input and output tables: ``2·V·d``."""
        return 2 * self.table_parameters

    def bytes(self, *, tied: bool, bytes_per_parameter: int) -> int:
        return (self.tied_parameters if tied else self.untied_parameters) * bytes_per_parameter


def embedding_memory(*, name: str, rows: int, width: int) -> EmbeddingMemory:
    """Parameters and bytes of ``rows × width`` vocabulary tables.

    Example: Llama-3.1-8B, V=128256, d=4096 → untied 2·V·d = 1,050,673,152 parameters.

    Raises:
        UsageError(INVALID_ARGUMENT): rows or width not positive.
    """
    if rows <= 0 or width <= 0:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"table size must be positive, got V={rows}, d={width}",
            value=(rows, width),
            fix="pass V >= 1 and d >= 1",
        )
    return EmbeddingMemory(name=name, rows=rows, width=width)
