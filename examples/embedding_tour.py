"""Embedding tables that check their ids: address hashes, PAD, out-of-range ids.

python examples/embedding_tour.py
"""

import torch

from tokembed.embedding import AddressedIds, TokenEmbedding
from tokembed.errors import TokembedError
from tokembed.tokenizer import TrainConfig, train

text = "низко низко летали ласточки, ласточки летали низко"
tok = train([text], config=TrainConfig(merges=6, progress=False))

h = tok.address_hash  # "sha256:..." names the tokenizer's address space
emb = TokenEmbedding(8, 3, padding_idx=0, zero_pad_row=True, address_hash=h)
batch = AddressedIds.from_lists([[1, 4, 6, 2], [1, 5, 2]], source=h, pad_id=0)
print(tuple(emb(batch).shape))
for bad in ([[1, 4, 9]], [[1, -1]]):
    try:
        emb(torch.tensor(bad))
    except TokembedError as err:
        print(err)
