# DistributedDataParallel training of a small MLP on synthetic data (each
# rank its own shard, seeded), on the backend named; rank 0 writes the final
# parameters to --out. tests run it with chorus and with gloo and compare.
# Usage: torch_ddp.py --backend chorus|gloo --out FILE [--steps N]
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus.torch

p = argparse.ArgumentParser()
p.add_argument("--backend", default="chorus")
p.add_argument("--out", required=True)
p.add_argument("--steps", type=int, default=300)
a = p.parse_args()
if a.backend == "chorus":
    rank, n = chorus.torch.init_process_group()
else:
    dist.init_process_group(a.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)  # the same initial model everywhere
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                            torch.nn.ReLU(), torch.nn.Linear(64, 1))
ddp = DDP(model, bucket_cap_mb=0.01)  # several buckets: gradients reduced while backward runs
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
g = torch.Generator().manual_seed(1000 + rank)
w_true = torch.randn(16, 1, generator=torch.Generator().manual_seed(7))
for step in range(a.steps):
    x = torch.randn(32, 16, generator=g)
    y = torch.tanh(x @ w_true) + 0.01 * torch.randn(32, 1, generator=g)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(ddp(x), y)
    loss.backward()
    opt.step()
    if step % 100 == 0 and rank == 0:
        print(f"{a.backend} step {step} loss {loss.item():.5f}")
# Every rank holds the same parameters (DDP's point): check across ranks.
flat = torch.cat([q.detach().reshape(-1) for q in model.parameters()])
mx, mn = flat.clone(), flat.clone()
dist.all_reduce(mx, op=dist.ReduceOp.MAX)
dist.all_reduce(mn, op=dist.ReduceOp.MIN)
assert torch.equal(mx, mn), "ranks disagree on the parameters"
if rank == 0:
    torch.save(model.state_dict(), a.out)
    print(f"{a.backend}: final loss {loss.item():.5f}")
dist.destroy_process_group()
