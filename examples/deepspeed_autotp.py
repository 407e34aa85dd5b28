"""DeepSpeed AutoTP with the input embedding sharded by vocabulary (CPU, gloo, 2 ranks).

    OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 examples/deepspeed_autotp.py

AutoTP shards the linears; ``initialize_autotp`` first shards the (untied) input
embedding over the group AutoTP then uses. The first step's loss equals the loss
of the same model in one process.
"""

import os
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # this example runs on CPU with gloo

import deepspeed  # reads DS_ACCELERATOR when imported
import torch
import torch.distributed as dist
from transformers import LlamaConfig, LlamaForCausalLM

from tokembed.parallel import initialize_autotp

deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # gloo only, skip a JIT build
deepspeed.init_distributed(dist_backend="gloo")
rank = dist.get_rank()
torch.manual_seed(0)  # the same full model on every rank
model = LlamaForCausalLM(LlamaConfig(vocab_size=32000, hidden_size=256, intermediate_size=512,
    num_hidden_layers=2, num_attention_heads=4, tie_word_embeddings=False))  # fmt: skip
ids = torch.randint(0, 32000, (4, 16), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    single = model(input_ids=ids, labels=ids).loss.item()

config = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_clipping": 0.0,  # DeepSpeed clips at 1.0 by default; 0 to compare losses
    "optimizer": {"type": "SGD", "params": {"lr": 0.5}},
    "tensor_parallel": {"autotp_size": 2, "vocab_parallel_embedding": True},
    "steps_per_print": 10**6,
}
engine, *_ = initialize_autotp(model, config)
loss = engine(input_ids=ids, labels=ids).loss
engine.backward(loss)
engine.step()
emb = engine.module.get_input_embeddings()
mib = emb.weight.numel() * emb.weight.element_size() / 2**20
line = (
    f"rank {rank}: step 0 loss {loss.item():.4f} (one process {single:.4f}); {emb}, {mib:.2f} MiB"
)
lines: list[str | None] = [None] * dist.get_world_size()
dist.all_gather_object(lines, line)
if rank == 0:
    print("\n".join(str(x) for x in lines))
dist.barrier()
dist.destroy_process_group()
# Leave without interpreter teardown. A gloo worker thread can still drop the
# last reference to a finished collective's tensors after the caller has woken
# (DeepSpeed keeps its subgroups alive, so their threads outlive the barrier
# above); on Python 3.11 a thread that asks for the GIL while the interpreter
# finalizes is ended with pthread_exit, which aborts a C++ thread ("terminate
# called without an active exception": ~1 run in 8 without the barrier, and
# still seen in CI with it). Both ranks are done and synchronized here, so
# nothing is lost by skipping teardown.
sys.stdout.flush()
os._exit(0)
