"""Audits before training: under-trained tokens, tokenizer/model admission, the initial state, the failure lab.

Each audit reads what a training script already has (a model folder or module, a
tokenizer, a batch) and answers with one line per check and a stable code, so a
script can stop before step 0 and a CI job can gate on the exit status.
"""

from tokembed.audit import checks, conformance, identity, lab, pair, shapes, tokens
from tokembed.audit.checks import *
from tokembed.audit.conformance import *
from tokembed.audit.identity import *
from tokembed.audit.lab import *
from tokembed.audit.pair import *
from tokembed.audit.shapes import *
from tokembed.audit.tokens import *

__all__: list[str] = []
__all__ += checks.__all__
__all__ += conformance.__all__
__all__ += identity.__all__
__all__ += lab.__all__
__all__ += pair.__all__
__all__ += shapes.__all__
__all__ += tokens.__all__
