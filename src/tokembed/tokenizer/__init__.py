"""Byte-level BPE: pre-tokenization, training, encoding, decoding, special tokens, file formats.

This package never imports torch.
"""

from tokembed.tokenizer.model import BPETables, address_hash
from tokembed.tokenizer.pretokenize import PATTERNS, Pretokenizer

__all__ = ["PATTERNS", "BPETables", "Pretokenizer", "address_hash"]
