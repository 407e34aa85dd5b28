"""A whole Hugging Face Llama with its tied embedding and head sharded over 2 ranks.

OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 examples/hf_model_parallel.py
"""

import torch
import torch.distributed as dist
from transformers import LlamaConfig, LlamaForCausalLM

from tokembed.parallel import causal_lm_loss, count_collectives, shard_input_embedding

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)  # the same full model on every rank
model = LlamaForCausalLM(LlamaConfig(vocab_size=131, hidden_size=32, intermediate_size=64,
    num_hidden_layers=2, num_attention_heads=4, tie_word_embeddings=True))  # fmt: skip
ids = torch.randint(0, 131, (2, 12), generator=torch.Generator().manual_seed(1))
single = model(input_ids=ids, labels=ids).loss  # before sharding: one process's loss

emb = shard_input_embedding(model, tie=True)  # the tied head is sharded with it
assert emb is not None
assert model.lm_head.weight is emb.weight  # one Parameter per rank
with count_collectives() as ledger:
    loss = causal_lm_loss(model, ids)
    loss.backward()
line = (
    f"rank {rank} rows [{emb.vocab_start}, {emb.vocab_end}) loss {loss.item():.6f} "
    f"single-process {single.item():.6f} collectives {ledger.by_op()}"
)
lines: list[str | None] = [None] * dist.get_world_size()
dist.all_gather_object(lines, line)
if rank == 0:
    print("\n".join(str(x) for x in lines))
dist.destroy_process_group()
