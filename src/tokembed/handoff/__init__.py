"""What crosses into a model's first layer besides token lookups: positions, media rows, projectors, adapters.

Feature rows from a media encoder, the projector or adapter that maps them to the
model's width, and the assembly of mixed-origin input rows each carry a declared
contract (source encoder, semantic space, row count, row types, geometry) that is
checked where the rows meet, because every shape in these paths can be right while
the meaning is wrong.

Submodules are imported on first use of a name (see ``tokembed._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokembed._lazy import attach

if TYPE_CHECKING:
    from tokembed.handoff.adapter import (
        Adapted,
        PatchMerger,
        QueryBottleneck,
        check_evidence,
        check_row_map,
    )
    from tokembed.handoff.kinds import (
        Kind,
        Representation,
        declare,
        declare_hidden_states,
        representation_of,
        require_contextual,
        require_same_space,
        retrieval_scores,
    )
    from tokembed.handoff.media_projector import (
        MediaProjector,
        ProjectorContract,
        Trainability,
        check_trainability,
    )
    from tokembed.handoff.rows import (
        GEOMETRY_WIDTH,
        MediaRows,
        RowMap,
        RowType,
        pad_media,
        row_map_of,
    )
    from tokembed.handoff.x0 import (
        X0,
        Span,
        TextRows,
        X0Layout,
        assemble_x0,
    )

# Public name -> submodule.
_SOURCES: dict[str, str] = {
    "Adapted": "adapter",
    "GEOMETRY_WIDTH": "rows",
    "Kind": "kinds",
    "MediaProjector": "media_projector",
    "MediaRows": "rows",
    "PatchMerger": "adapter",
    "ProjectorContract": "media_projector",
    "QueryBottleneck": "adapter",
    "Representation": "kinds",
    "RowMap": "rows",
    "RowType": "rows",
    "Span": "x0",
    "TextRows": "x0",
    "Trainability": "media_projector",
    "X0": "x0",
    "X0Layout": "x0",
    "assemble_x0": "x0",
    "check_evidence": "adapter",
    "check_row_map": "adapter",
    "check_trainability": "media_projector",
    "declare": "kinds",
    "declare_hidden_states": "kinds",
    "pad_media": "rows",
    "representation_of": "kinds",
    "require_contextual": "kinds",
    "require_same_space": "kinds",
    "retrieval_scores": "kinds",
    "row_map_of": "rows",
}

__all__ = [
    "GEOMETRY_WIDTH",
    "X0",
    "Adapted",
    "Kind",
    "MediaProjector",
    "MediaRows",
    "PatchMerger",
    "ProjectorContract",
    "QueryBottleneck",
    "Representation",
    "RowMap",
    "RowType",
    "Span",
    "TextRows",
    "Trainability",
    "X0Layout",
    "assemble_x0",
    "check_evidence",
    "check_row_map",
    "check_trainability",
    "declare",
    "declare_hidden_states",
    "pad_media",
    "representation_of",
    "require_contextual",
    "require_same_space",
    "retrieval_scores",
    "row_map_of",
]
__getattr__, __dir__ = attach(__name__, _SOURCES)
