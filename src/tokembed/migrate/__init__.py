"""Vocabulary change as a migration of model, optimizer and release state (torch).

Classify the change between two tokenizers (:func:`classify_change`), build the
exact row map (:func:`row_map`), initialize the other rows (:class:`NewRows`),
migrate every vocabulary-indexed tensor and its optimizer state
(:func:`migrate_model`; a distributed checkpoint folder offline, table by table:
:func:`migrate_checkpoint`), freeze rows (:func:`freeze_rows`), measure what the
new rows did to the output distribution (:func:`probability_shift`) and bind
it all in a release manifest (:mod:`tokembed.migrate.release`). Vocabulary-parallel
tables: :mod:`tokembed.migrate.shards` (imported on its own; it needs torch.distributed);
a DeepSpeed ZeRO-3 engine: :func:`migrate_zero3` (gathers, migrates, rebuilds the engine).
"""

from tokembed.migrate import (
    apply,
    classify,
    freeze,
    init,
    measure,
    offline,
    optimizer,
    release,
    roles,
    rowmap,
    shards,
    zero3,
)
from tokembed.migrate.apply import *
from tokembed.migrate.classify import *
from tokembed.migrate.freeze import *
from tokembed.migrate.init import *
from tokembed.migrate.measure import *
from tokembed.migrate.offline import *
from tokembed.migrate.optimizer import *
from tokembed.migrate.release import *
from tokembed.migrate.roles import *
from tokembed.migrate.rowmap import *
from tokembed.migrate.shards import *
from tokembed.migrate.zero3 import *

__all__: list[str] = []
__all__ += apply.__all__
__all__ += classify.__all__
__all__ += freeze.__all__
__all__ += init.__all__
__all__ += measure.__all__
__all__ += offline.__all__
__all__ += optimizer.__all__
__all__ += release.__all__
__all__ += roles.__all__
__all__ += rowmap.__all__
__all__ += shards.__all__
__all__ += zero3.__all__
