# torch.distributed on Chorus against gloo, side by side in one job: the same
# all_reduce / all_gather / reduce_scatter / all_to_all_single calls on a
# Chorus group and a gloo group of the same processes, on the same tensors,
# interleaved (each size: chorus, gloo, chorus, gloo ...), float32, median
# time per call, busbw as nccl-tests count it.
#
#   --device cpu   (default) CPU tensors on Chorus's own backend (chorus.torch)
#   --device cuda  CUDA tensors, every process on GPU 0, on the "nccl" backend
#                  served by libchorus-nccl (LD_PRELOAD it; each process
#                  checks it is the NCCL loaded). gloo runs the same CUDA
#                  tensors (it copies them to the host); where this torch's
#                  gloo lacks an op the row says n/a.
#
# Every size is checked once before it is timed (values distinct per rank and
# element, exact in float32). Run under a launcher, one process per rank:
#   tests/python/torchrun_env.py --nproc N bench/torch_bench.py [--device cuda]
# (bench/torch_compare.sh runs the CPU table for 2 / 4 / 8 processes; the GPU
# one is a step of scripts/gpu_check.sh.)
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist


def size_arg(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


p = argparse.ArgumentParser()
p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
p.add_argument("--min", type=size_arg, default=4 << 10, help="bytes per rank's buffer (4K, 1M..)")
p.add_argument("--max", type=size_arg, default=128 << 20)
p.add_argument("--factor", type=int, default=16)
p.add_argument("--rounds", type=int, default=5, help="interleaved rounds per size")
p.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter,all_to_all_single")
p.add_argument("--real-nccl", action="store_true",
               help="--device cuda: run on whatever NCCL is loaded (a baseline; NCCL itself "
                    "needs a GPU per process)")
a = p.parse_args()

rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if a.device == "cuda":
    torch.cuda.set_device(int(os.environ.get("CHORUS_BENCH_GPU", "0")))
    dev = torch.device("cuda", torch.cuda.current_device())
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = os.environ.get("MASTER_PORT", "29500")
    dist.init_process_group("nccl", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=n)
    with open("/proc/self/maps") as f:
        if not a.real_nccl and not any("libchorus-nccl" in line for line in f):
            raise SystemExit("libchorus-nccl is not loaded: LD_PRELOAD it (or pass --real-nccl)")
else:
    import chorus.torch

    chorus.torch.init_process_group()
    dev = torch.device("cpu")
    torch.set_num_threads(1)
groups = {"chorus": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}


def sync():
    if a.device == "cuda":
        torch.cuda.synchronize()


def call(op, group, buf, out):
    if op == "all_reduce":
        dist.all_reduce(buf, group=group)
    elif op == "all_gather":
        if hasattr(dist, "all_gather_into_tensor") and a.device == "cuda":
            dist.all_gather_into_tensor(out, buf, group=group)
        else:  # the list form: gloo in torch 1.13 has no all_gather_into_tensor
            dist.all_gather(list(out.chunk(n)), buf, group=group)
    elif op == "reduce_scatter":
        if hasattr(dist, "reduce_scatter_tensor") and a.device == "cuda":
            dist.reduce_scatter_tensor(out, buf, group=group)
        else:
            dist.reduce_scatter(out, list(buf.chunk(n)), group=group)
    else:
        dist.all_to_all_single(out, buf, group=group)


def shapes(op, elems):
    """Input and output elements of one rank for a `elems`-element size."""
    if op == "all_gather":
        return elems // n, elems
    if op == "reduce_scatter":
        return elems, elems // n
    return elems, elems


def check(op, elems):
    """One call on the Chorus group, values distinct per rank and element."""
    ins, outs = shapes(op, elems)
    i = torch.arange(ins, dtype=torch.float32, device=dev) % 4096
    buf = i + 10000 * rank
    out = torch.full((outs,), -1.0, device=dev)
    call(op, groups["chorus"], buf, out)
    sync()
    if op == "all_reduce":
        got, want = buf, i * n + 10000 * n * (n - 1) / 2
    elif op == "all_gather":
        j = torch.arange(ins, dtype=torch.float32, device=dev) % 4096
        got, want = out, torch.cat([j + 10000 * q for q in range(n)])
    elif op == "reduce_scatter":
        got, want = out, i[rank * outs:(rank + 1) * outs] * n + 10000 * n * (n - 1) / 2
    else:
        blk = ins // n
        got = out
        want = torch.cat([i[rank * blk:(rank + 1) * blk] + 10000 * q for q in range(n)])
    if not torch.equal(got, want):
        bad = (got != want).nonzero()[:4].flatten().tolist()
        raise SystemExit(f"rank {rank}: {op} of {elems * 4} bytes differs at elements {bad}")


def timed(op, group, buf, out, iters):
    dist.barrier(group=groups["gloo"])
    t0 = time.perf_counter()
    for _ in range(iters):
        call(op, group, buf, out)
    sync()
    dt = torch.tensor([(time.perf_counter() - t0) / iters])
    dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=groups["gloo"])  # the slowest rank's
    return dt.item()


def supported(op, group, buf, out):
    """Whether this group's backend has the op (gloo lacks some); the same
    answer on every rank, which all try it."""
    try:
        call(op, group, buf, out)
        sync()
        ok = torch.tensor([1.0])
    except (RuntimeError, ValueError):
        ok = torch.tensor([0.0])
    dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=groups["gloo"])
    return ok.item() > 0


if rank == 0:
    where = (f"{n} processes on {torch.cuda.get_device_name()}" if a.device == "cuda"
             else f"{n} processes")
    print(f"# {where}, float32; time per call (median of {a.rounds} interleaved rounds), "
          "busbw as nccl-tests; every size checked once first")
    print("op,bytes,chorus_us,gloo_us,speedup,chorus_busbw_GBs,gloo_busbw_GBs")
sizes = []
size = a.min
while size < a.max:
    sizes.append(size)
    size *= a.factor
sizes.append(a.max)
for op in a.ops.split(","):
    for size in sizes:
        elems = max(size // 4 // n, 1) * n  # a multiple of n
        check(op, elems)
        ins, outs = shapes(op, elems)
        buf = torch.ones(ins, device=dev)
        out = torch.empty(outs, device=dev)
        iters = max(2, min(200, (32 << 20) // size))
        live = {k: g for k, g in groups.items() if supported(op, g, buf, out)}  # and warm
        times = {k: [] for k in live}
        for _ in range(a.rounds):
            for k, g in live.items():
                times[k].append(timed(op, g, buf, out, iters))
        med = {k: statistics.median(v) for k, v in times.items()}
        factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
        nbytes = elems * 4
        bus = {k: nbytes / med[k] * factor / 1e9 for k in med}
        if rank == 0:
            def us(k):
                return f"{med[k] * 1e6:.1f}" if k in med else "n/a"

            def bw(k):
                return f"{bus[k]:.3f}" if k in bus else "n/a"

            speedup = f"{med['gloo'] / med['chorus']:.2f}" if len(med) == 2 else "n/a"
            print(f"{op},{nbytes},{us('chorus')},{us('gloo')},{speedup},{bw('chorus')},"
                  f"{bw('gloo')}", flush=True)
# Drop the groups here so that destroying them joins their threads while the
# interpreter lives: a gloo worker that drops a tensor once it is finalizing
# aborts the process.
groups.clear()
dist.destroy_process_group()
