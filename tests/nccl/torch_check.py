#!/usr/bin/env python3
"""PyTorch, unmodified, on libchorus-nccl: torch.distributed with the "nccl"
backend in N processes that all use GPU 0 (NCCL itself refuses ranks sharing a
GPU; Chorus serves them, each process's collectives on its own kernels over
CUDA IPC; CHORUS_GPU_IPC=0 stages them through host memory).

Each process checks allreduce (sum, avg), all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single and broadcast on values distinct per
rank and element, and an allreduce captured in a CUDA graph and replayed; then
the processes train a small MLP with
DistributedDataParallel for --steps steps, and rank 0 trains the same model on
the same data alone and checks the parameters agree within fp32 tolerance.
Every process also checks that libchorus-nccl is the NCCL it has loaded.

Run with the library preloaded (scripts/gpu_check.sh does):
  LD_PRELOAD=build/gpu/src/nccl/libchorus-nccl.so NCCL_DEBUG=INFO \\
      python3 tests/nccl/torch_check.py --procs 2
Exit 0 when every check passed.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ports import free_port  # noqa: E402


def chorus_loaded():
    with open("/proc/self/maps") as f:
        return any("libchorus-nccl" in line for line in f)


def expect(name, got, want):
    if not torch.equal(got.cpu(), want.cpu()):
        bad = (got.cpu() != want.cpu()).nonzero()[:5].flatten().tolist()
        raise AssertionError(f"{name}: differs at {bad}: got {got.cpu().flatten()[:8]}, "
                             f"want {want.cpu().flatten()[:8]}")


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))


def batches(steps, global_batch):
    g = torch.Generator().manual_seed(1234)
    for _ in range(steps):
        yield torch.randn(global_batch, 32, generator=g), torch.randn(global_batch, 4, generator=g)


def collectives(rank, world, dev):
    n = 1031
    i = torch.arange(n, dtype=torch.float32, device=dev)
    x = i + 1000 * rank
    dist.all_reduce(x)
    expect("all_reduce sum", x, i * world + 1000 * world * (world - 1) / 2)
    y = (i + rank) * world
    dist.all_reduce(y, op=dist.ReduceOp.AVG)
    expect("all_reduce avg", y, i * world + world * (world - 1) / 2)
    mine = torch.arange(n, dtype=torch.int32, device=dev) + rank * n
    out = torch.empty(world * n, dtype=torch.int32, device=dev)
    dist.all_gather_into_tensor(out, mine)
    expect("all_gather_into_tensor", out, torch.arange(world * n, dtype=torch.int32))
    src = torch.arange(world * n, dtype=torch.int64, device=dev) + rank
    part = torch.empty(n, dtype=torch.int64, device=dev)
    dist.reduce_scatter_tensor(part, src)
    want = (torch.arange(n, dtype=torch.int64) + rank * n) * world + world * (world - 1) // 2
    expect("reduce_scatter_tensor", part, want)
    a2a_in = torch.tensor([rank * 100 + q for q in range(world) for _ in range(7)],
                          dtype=torch.int32, device=dev)
    a2a_out = torch.empty_like(a2a_in)
    dist.all_to_all_single(a2a_out, a2a_in)
    expect("all_to_all_single", a2a_out,
           torch.tensor([q * 100 + rank for q in range(world) for _ in range(7)], dtype=torch.int32))
    b = torch.full((n,), float(rank), device=dev) if rank != world - 1 else i * 3
    dist.broadcast(b, src=world - 1)
    expect("broadcast", b, i * 3)
    torch.cuda.synchronize()


def graph_replay(rank, world, dev):
    """An allreduce captured in a CUDA graph, replayed with new inputs."""
    static = torch.zeros(257, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        dist.all_reduce(static)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dist.all_reduce(static)
    for k in range(3):
        static.copy_(torch.arange(257, dtype=torch.float32, device=dev) + 10 * rank + k)
        g.replay()
        torch.cuda.synchronize()
        want = (torch.arange(257, dtype=torch.float32) + k) * world + 10 * world * (world - 1) / 2
        expect(f"graph replay {k}", static, want)


def worker(rank, world, port, steps, failures):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    try:
        dist.init_process_group("nccl", rank=rank, world_size=world)
        if not chorus_loaded():
            raise AssertionError("libchorus-nccl is not loaded (LD_PRELOAD it)")
        collectives(rank, world, dev)
        graph_replay(rank, world, dev)
        global_batch = 8 * world
        model = torch.nn.parallel.DistributedDataParallel(make_model(7).to(dev))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for xb, yb in batches(steps, global_batch):
            shard = slice(rank * 8, rank * 8 + 8)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xb[shard].to(dev)), yb[shard].to(dev))
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        if rank == 0:
            ref = make_model(7).to(dev)
            ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
            for xb, yb in batches(steps, global_batch):
                ref_opt.zero_grad()
                torch.nn.functional.mse_loss(ref(xb.to(dev)), yb.to(dev)).backward()
                ref_opt.step()
            for (name, p), q in zip(model.module.named_parameters(), ref.parameters()):
                if not torch.allclose(p, q, rtol=1e-4, atol=1e-5):
                    raise AssertionError(f"DDP parameter {name} differs from the single-process "
                                         f"run by {(p - q).abs().max().item():g}")
            print(f"ok: {world} processes on GPU 0: collectives and a graph replay checked, DDP "
                  f"{steps} steps equal to one process", flush=True)
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - every failure is reported by rank
        print(f"rank {rank}: FAILED: {e}", flush=True)
        failures.put(rank)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("skipped: no GPU")
        return 77
    ctx = mp.get_context("spawn")
    failures = ctx.SimpleQueue()
    mp.start_processes(worker, args=(args.procs, free_port(), args.steps, failures),
                       nprocs=args.procs, start_method="spawn")
    return 1 if not failures.empty() else 0


if __name__ == "__main__":
    sys.exit(main())
