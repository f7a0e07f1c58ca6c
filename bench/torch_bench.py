# torch.distributed's chorus backend against gloo, side by side in one job:
# the same all_reduce / all_gather (list) / all_to_all_single calls on
# a chorus group and a gloo group of the same processes, interleaved (each
# size: chorus, gloo, chorus, gloo ...), float32, median time per call.
# Run under a launcher (bench/torch_compare.sh runs it for 2 / 4 / 8
# processes): tests/python/torchrun_env.py --nproc N bench/torch_bench.py
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import chorus.torch

p = argparse.ArgumentParser()
p.add_argument("--min", type=int, default=4 << 10, help="bytes per rank's buffer")
p.add_argument("--max", type=int, default=128 << 20)
p.add_argument("--factor", type=int, default=16)
p.add_argument("--rounds", type=int, default=5, help="interleaved rounds per size")
p.add_argument("--ops", default="all_reduce,all_gather,all_to_all_single")
a = p.parse_args()

rank, n = chorus.torch.init_process_group()
groups = {"chorus": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
torch.set_num_threads(1)


def call(op, group, buf, out):
    if op == "all_reduce":
        dist.all_reduce(buf, group=group)
    elif op == "all_gather":
        # The list form: gloo in torch 1.13 has no all_gather_into_tensor.
        dist.all_gather(list(out.chunk(n)), buf, group=group)
    else:
        dist.all_to_all_single(out, buf, group=group)


def timed(op, group, buf, out, iters):
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        call(op, group, buf, out)
    dt = torch.tensor([(time.perf_counter() - t0) / iters])
    dist.all_reduce(dt, op=dist.ReduceOp.MAX, group=groups["gloo"])  # the slowest rank's
    return dt.item()


if rank == 0:
    print(f"# {n} processes, float32; time per call (median of {a.rounds} interleaved rounds), "
          "busbw as nccl-tests")
    print("op,bytes,chorus_us,gloo_us,speedup,chorus_busbw_GBs,gloo_busbw_GBs")
sizes = []
size = a.min
while size < a.max:
    sizes.append(size)
    size *= a.factor
sizes.append(a.max)
for op in a.ops.split(","):
    for size in sizes:
        elems = size // 4
        elems -= elems % n
        buf = torch.ones(elems)
        out = torch.empty(elems * n if op == "all_gather" else elems)
        iters = max(2, min(200, (32 << 20) // size))
        for g in groups.values():
            call(op, g, buf, out)  # warm-up: connections, pages
        times = {k: [] for k in groups}
        for _ in range(a.rounds):
            for k, g in groups.items():
                times[k].append(timed(op, g, buf, out, iters))
        med = {k: statistics.median(v) for k, v in times.items()}
        factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n,
                  "all_to_all_single": (n - 1) / n}[op]
        nbytes = elems * 4 * (n if op == "all_gather" else 1)
        bus = {k: nbytes / med[k] * factor / 1e9 for k in med}
        if rank == 0:
            print(f"{op},{elems * 4},{med['chorus'] * 1e6:.1f},{med['gloo'] * 1e6:.1f},"
                  f"{med['gloo'] / med['chorus']:.2f},{bus['chorus']:.3f},{bus['gloo']:.3f}",
                  flush=True)
dist.destroy_process_group()
