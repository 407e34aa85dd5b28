"""What becomes a model's first-layer input besides token lookups: media rows, projectors, adapters.

Feature rows from a media encoder (:mod:`~tokembed.inputs.rows`), what kind of
"embedding" a tensor is (:mod:`~tokembed.inputs.kinds`), the projector or
count-changing adapter that maps media rows to the model's width
(:mod:`~tokembed.inputs.media_projector`, :mod:`~tokembed.inputs.adapter`) and the
assembly of text and media rows into the model's input sequence
(:mod:`~tokembed.inputs.sequence`) each carry a declared contract (source encoder,
semantic space, row count, row types, geometry) that is checked where the rows meet,
because every shape in these paths can be right while the meaning is wrong.

Example::

    >>> from tokembed.inputs import RowType, pad_media
    >>> pad_media([torch.ones(2, 4), torch.ones(1, 4)], row_type=RowType.IMAGE).mask.tolist()
    [[True, True], [True, False]]
"""

from tokembed.inputs import adapter, kinds, media_projector, rows, sequence
from tokembed.inputs.adapter import *
from tokembed.inputs.kinds import *
from tokembed.inputs.media_projector import *
from tokembed.inputs.rows import *
from tokembed.inputs.sequence import *

__all__: list[str] = []
__all__ += adapter.__all__
__all__ += kinds.__all__
__all__ += media_projector.__all__
__all__ += rows.__all__
__all__ += sequence.__all__
