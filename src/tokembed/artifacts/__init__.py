"""Model artifacts on disk: config.json, safetensors and GGUF files, and what they record.

Every package that reads or writes a model's files goes through here, so each
format is parsed, validated and written in one place:

* :mod:`~tokembed.artifacts.config` — a Hugging Face ``config.json`` read into
  the fields of its text model (:func:`read_model_config`).

Importing this package never imports torch, safetensors, transformers or gguf:
the functions that need them import them when called.

Example::

    >>> from tokembed.artifacts import model_config_from_dict
    >>> model_config_from_dict({"vocab_size": 49152, "hidden_size": 576}).vocab_size
    49152
"""

from tokembed.artifacts import config
from tokembed.artifacts.config import *

__all__: list[str] = []
__all__ += config.__all__
