"""A vocabulary-parallel embedding and its tied LM head on 4 ranks, against one process.

    OMP_NUM_THREADS=1 torchrun --nproc-per-node 4 examples/vocab_parallel.py

V = 10 rows are split into contiguous ceil(V/R) chunks: [0,3) [3,6) [6,9) [9,10).
Rank 0 prints what every rank found.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from tokembed.errors import TokembedError
from tokembed.parallel import (
    VocabParallelEmbedding,
    VocabParallelLMHead,
    vocab_parallel_cross_entropy,
)

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
full = nn.Embedding(10, 4, padding_idx=4)  # the same table on every rank (same seed)
ids = torch.tensor([[1, 4, 7, 9], [3, 0, 8, 2]])
target = torch.tensor([[4, 7, 9, 3], [0, 8, 2, 5]])

emb = VocabParallelEmbedding.from_embedding(full)  # keep this rank's rows
head = VocabParallelLMHead(4, 10, tie_to=emb)  # head.weight is emb.weight
loss = vocab_parallel_cross_entropy(head(emb(ids)), target, vocab_start=head.vocab_start)
single = F.cross_entropy((full(ids) @ full.weight.T).flatten(0, 1), target.flatten())
line = (
    f"rank {rank}: rows {emb.vocab_start}:{emb.vocab_end} weight {tuple(emb.weight.shape)} "
    f"tied={head.weight is emb.weight} loss={loss.item():.6f} single-process={single.item():.6f}"
)

# In tensor parallelism every rank holds the same ids, so a bad id raises on every rank
# before any collective (no hang, no silent zero row).
try:
    emb(torch.tensor([[1, 99]]))
except TokembedError as err:
    line += f"\n  id 99 on every rank: {type(err).__name__} {err.code}"
# When ranks may hold different ids, id_check="group" spends one all-reduce so that all
# ranks raise together instead of leaving the others waiting in a collective.
checked = VocabParallelEmbedding.from_embedding(full, id_check="group")
try:
    checked(torch.tensor([[1, 99]]) if rank == 0 else ids)
except TokembedError as err:
    line += f"\n  id 99 on rank 0 only, id_check='group': {type(err).__name__} {err.code}"

lines: list[str | None] = [None] * dist.get_world_size()
dist.all_gather_object(lines, line)
if rank == 0:
    print("\n".join(str(x) for x in lines))
dist.destroy_process_group()
