"""Byte-level BPE: pre-tokenization, training, encoding, decoding, special tokens, file formats.

This package never imports torch.
"""

from tokembed.tokenizer.decode import StreamDecoder
from tokembed.tokenizer.model import BPETables, address_hash
from tokembed.tokenizer.pretokenize import PATTERNS, Pretokenizer
from tokembed.tokenizer.tokenizer import Tokenizer
from tokembed.tokenizer.train import TrainConfig, train
from tokembed.tokenizer.train_reference import train_reference

__all__ = [
    "PATTERNS",
    "BPETables",
    "Pretokenizer",
    "StreamDecoder",
    "Tokenizer",
    "TrainConfig",
    "address_hash",
    "train",
    "train_reference",
]
