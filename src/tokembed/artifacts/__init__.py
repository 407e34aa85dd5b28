"""Model artifacts on disk: config.json, safetensors and GGUF files, and what they record.

Every package that reads or writes a model's files goes through here, so each
format is parsed, validated and written in one place:

* :mod:`~tokembed.artifacts.config` — a Hugging Face ``config.json`` read into
  the fields of its text model (:func:`read_model_config`);
* :mod:`~tokembed.artifacts.safetensors_header` — a safetensors header read and
  checked without touching tensor bytes, and the tokembed record in it;
* :mod:`~tokembed.artifacts.safetensors_writer` — the one safetensors writer,
  streaming tensor bytes to the file (:func:`write_safetensors`);
* :mod:`~tokembed.artifacts.dcp_metadata` / :mod:`~tokembed.artifacts.dcp_io` —
  distributed checkpoint folders: their metadata checked before any byte is
  loaded, and the one writer and reader of sharded state (:func:`write_dcp`);
* :mod:`~tokembed.artifacts.gguf_reader` — a GGUF header and one tensor at a time;
* :mod:`~tokembed.artifacts.models` — a transformers model loaded from a folder
  or a GGUF file (:func:`load_model`), or built empty from its config;
* :mod:`~tokembed.artifacts.recorded_hash` — the tokenizer address hash a
  model's files record;
* :mod:`~tokembed.artifacts.digest` — the one digest of a tensor (:func:`tensor_digest`) or of
  plain data such as a list of records (:func:`data_digest`).

Importing this package never imports torch, safetensors, transformers or gguf:
the functions that need them import them when called.

Example::

    >>> from tokembed.artifacts import model_config_from_dict
    >>> model_config_from_dict({"vocab_size": 49152, "hidden_size": 576}).vocab_size
    49152
"""

from tokembed.artifacts import (
    config,
    dcp_io,
    dcp_metadata,
    digest,
    gguf_reader,
    models,
    recorded_hash,
    safetensors_header,
    safetensors_writer,
)
from tokembed.artifacts.config import *
from tokembed.artifacts.dcp_io import *
from tokembed.artifacts.dcp_metadata import *
from tokembed.artifacts.digest import *
from tokembed.artifacts.gguf_reader import *
from tokembed.artifacts.models import *
from tokembed.artifacts.recorded_hash import *
from tokembed.artifacts.safetensors_header import *
from tokembed.artifacts.safetensors_writer import *

__all__: list[str] = []
__all__ += config.__all__
__all__ += dcp_io.__all__
__all__ += dcp_metadata.__all__
__all__ += digest.__all__
__all__ += gguf_reader.__all__
__all__ += models.__all__
__all__ += recorded_hash.__all__
__all__ += safetensors_header.__all__
__all__ += safetensors_writer.__all__
