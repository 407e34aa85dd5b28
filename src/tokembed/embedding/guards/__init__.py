"""Checks around the lookup that are not the lookup itself: they refuse states whose shapes all fit.

Each guard reads what a model, batch or training step actually did and refuses a state
that would train without an error but with another meaning:

* :mod:`~tokembed.embedding.guards.pad_masks` — the PAD id, ``padding_idx``, the
  attention mask and the label mask agree (:func:`check_pad_masks`);
* :mod:`~tokembed.embedding.guards.gradient_check` — a table gradient is the
  scatter-add of the lookup's upstream rows (:func:`check_lookup_gradient`);
* :mod:`~tokembed.embedding.guards.mutation` — a block of code left a table unchanged
  (:func:`unchanged_table`, over :func:`tokembed.artifacts.tensor_digest`);
* :mod:`~tokembed.embedding.guards.scale_ledger` — a stated row variance follows from
  the initializer, the shape and the input scale (:class:`ScaleLedger`);
* :mod:`~tokembed.embedding.guards.numerics` — the dtypes that really exist around one
  table, observed (:func:`observe_numerics`, :class:`NumericalState`).

Example::

    >>> from tokembed.embedding.guards import check_pad_masks
    >>> ids = torch.tensor([[5, 6, 0]])
    >>> check_pad_masks(ids, pad_id=0, padding_idx=0, attention_mask=ids.ne(0))
"""

from tokembed.embedding.guards import gradient_check, mutation, numerics, pad_masks, scale_ledger
from tokembed.embedding.guards.gradient_check import *
from tokembed.embedding.guards.mutation import *
from tokembed.embedding.guards.numerics import *
from tokembed.embedding.guards.pad_masks import *
from tokembed.embedding.guards.scale_ledger import *

__all__: list[str] = []
__all__ += gradient_check.__all__
__all__ += mutation.__all__
__all__ += numerics.__all__
__all__ += pad_masks.__all__
__all__ += scale_ledger.__all__
