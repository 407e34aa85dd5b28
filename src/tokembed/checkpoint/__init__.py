"""Weight tying and checkpoints that keep their alias graph (safetensors underneath).

* :func:`tie_report` / :func:`require_ties` — is every claimed tie one
  Parameter (object and storage), and is every shared table claimed?
* :func:`save_checkpoint` / :func:`load_checkpoint` — one tensor per alias
  group plus the alias map, tokenizer address hash, shard layout and
  per-logical-parameter optimizer state; loading restores the aliases first
  and proves them afterwards; :func:`verify_checkpoint` checks a file.
* :func:`untie`, :func:`tie`, :func:`factorize_tied`, :func:`defactorize` —
  tying-mode changes as explicit conversions with a manifest.
* :func:`derive_pack` / :func:`check_packs_tied` — quantized role packs of one
  logical table.
* :func:`check_output_head` — an output head's vocabulary axis and layout
  against the input table.
"""

from tokembed.checkpoint import (
    alias,
    checkpoint,
    convert,
    factorize,
    folder,
    format,
    heads,
    optimizer,
    packs,
    ties,
)
from tokembed.checkpoint.alias import *
from tokembed.checkpoint.checkpoint import *
from tokembed.checkpoint.convert import *
from tokembed.checkpoint.factorize import *
from tokembed.checkpoint.folder import *
from tokembed.checkpoint.format import *
from tokembed.checkpoint.heads import *
from tokembed.checkpoint.optimizer import *
from tokembed.checkpoint.packs import *
from tokembed.checkpoint.ties import *

__all__: list[str] = []
__all__ += alias.__all__
__all__ += checkpoint.__all__
__all__ += convert.__all__
__all__ += factorize.__all__
__all__ += folder.__all__
__all__ += format.__all__
__all__ += heads.__all__
__all__ += optimizer.__all__
__all__ += packs.__all__
__all__ += ties.__all__
