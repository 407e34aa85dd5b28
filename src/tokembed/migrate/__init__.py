"""Vocabulary change as a migration of model, optimizer and release state (torch).

Classify the change between two tokenizers (:func:`classify_change`), build the
exact row map (:func:`row_map`), initialize the other rows (:class:`NewRows`),
migrate every vocabulary-indexed tensor and its optimizer state
(:func:`migrate_model`), freeze rows (:func:`freeze_rows`), measure what the
new rows did to the output distribution (:func:`probability_shift`) and bind
it all in a release manifest (:mod:`tokembed.migrate.release`).
"""

from __future__ import annotations

from tokembed.migrate.apply import Migration, migrate_model, migrate_rows
from tokembed.migrate.classify import KINDS, VocabularyChange, classify_change, ordered_vocab_digest
from tokembed.migrate.init import (
    InitRecord,
    NewRows,
    bias_for_mass,
    bias_rows,
    decompositions,
    init_records,
    init_rows,
)
from tokembed.migrate.optimizer import check_state_migration, move_state, snapshot_state
from tokembed.migrate.roles import (
    VocabRoles,
    check_bindings,
    check_vocab_axes,
    require_bound,
    vocab_roles,
)
from tokembed.migrate.rowmap import RowMap, check_row_map, row_map

__all__ = [
    "KINDS",
    "InitRecord",
    "Migration",
    "NewRows",
    "RowMap",
    "VocabRoles",
    "VocabularyChange",
    "bias_for_mass",
    "bias_rows",
    "check_bindings",
    "check_row_map",
    "check_state_migration",
    "check_vocab_axes",
    "classify_change",
    "decompositions",
    "init_records",
    "init_rows",
    "migrate_model",
    "migrate_rows",
    "move_state",
    "ordered_vocab_digest",
    "require_bound",
    "row_map",
    "snapshot_state",
    "vocab_roles",
]
