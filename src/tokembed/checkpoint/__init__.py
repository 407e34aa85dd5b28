"""Weight tying and checkpoints that keep their alias graph (safetensors underneath).

* :func:`tie_report` / :func:`require_ties` — is every claimed tie one
  Parameter (object and storage), and is every shared table claimed?
* :func:`save_checkpoint` / :func:`load_checkpoint` — one tensor per alias
  group plus the alias map, tokenizer address hash, shard layout and
  per-logical-parameter optimizer state; loading restores the aliases first
  and proves them afterwards; :func:`verify_checkpoint` checks a file. Sharded
  models (FSDP2, DTensor plans, vocabulary-parallel tables) go to a
  ``torch.distributed.checkpoint`` folder that loads at any world size
  (:mod:`~tokembed.checkpoint.distributed`).
* :func:`check_shard_plan`, :func:`guard_ties`, :func:`materialize` — ties kept
  through ``fully_shard`` and ``to_empty``.
* :func:`untie`, :func:`tie`, :func:`factorize_tied`, :func:`defactorize` —
  tying-mode changes as explicit conversions with a manifest.
* :func:`derive_pack` / :func:`check_packs_tied` — quantized role packs of one
  logical table.
* :func:`check_output_head` — an output head's vocabulary axis and layout
  against the input table.
"""

from tokembed.checkpoint import (
    alias,
    binding,
    checkpoint,
    convert,
    distributed,
    factorize,
    folder,
    format,
    heads,
    optimizer,
    packs,
    sharded_ties,
    ties,
)
from tokembed.checkpoint.alias import *
from tokembed.checkpoint.binding import *
from tokembed.checkpoint.checkpoint import *
from tokembed.checkpoint.convert import *
from tokembed.checkpoint.distributed import *
from tokembed.checkpoint.factorize import *
from tokembed.checkpoint.folder import *
from tokembed.checkpoint.format import *
from tokembed.checkpoint.heads import *
from tokembed.checkpoint.optimizer import *
from tokembed.checkpoint.packs import *
from tokembed.checkpoint.sharded_ties import *
from tokembed.checkpoint.ties import *

__all__: list[str] = []
__all__ += alias.__all__
__all__ += binding.__all__
__all__ += checkpoint.__all__
__all__ += convert.__all__
__all__ += distributed.__all__
__all__ += factorize.__all__
__all__ += folder.__all__
__all__ += format.__all__
__all__ += heads.__all__
__all__ += optimizer.__all__
__all__ += packs.__all__
__all__ += sharded_ties.__all__
__all__ += ties.__all__
