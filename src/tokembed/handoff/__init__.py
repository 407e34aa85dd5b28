"""What crosses into a model's first layer besides token lookups: positions, media rows, projectors, adapters.

Feature rows from a media encoder, the projector or adapter that maps them to the
model's width, and the assembly of mixed-origin input rows each carry a declared
contract (source encoder, semantic space, row count, row types, geometry) that is
checked where the rows meet, because every shape in these paths can be right while
the meaning is wrong.

Submodules are imported on first use of a name (see ``tokembed._lazy``).
"""

from __future__ import annotations

from tokembed._lazy import attach

# Public name -> submodule.
_SOURCES: dict[str, str] = {}

__all__ = sorted(_SOURCES)
__getattr__, __dir__ = attach(__name__, _SOURCES)
