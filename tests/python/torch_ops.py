# One rank of a torch.distributed job on the chorus backend (run under
# torchrun, `chorus launch` or mpirun): every operation the backend serves,
# with data distinct per rank and element, checked exactly, for float32,
# float64, int32 and bfloat16 (values small enough to be exact in each).
# Usage: torch_ops.py [--backend chorus|gloo]
import argparse
import faulthandler
import sys

import torch
import torch.distributed as dist

import chorus.torch

parser = argparse.ArgumentParser()
parser.add_argument("--backend", default="chorus")
args = parser.parse_args()
faulthandler.dump_traceback_later(200, exit=True)  # a hang shows where, then fails

if args.backend == "chorus":
    rank, n = chorus.torch.init_process_group()
else:
    dist.init_process_group(args.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == args.backend


def base(dtype, size, who=None):
    who = rank if who is None else who
    return (torch.arange(size) % 17 + 20 * who).to(dtype)


def same(got, want, what):
    if not torch.equal(got, want):
        sys.exit(f"rank {rank}: {what}: got {got.tolist()[:8]} want {want.tolist()[:8]}")


for dtype in (torch.float32, torch.float64, torch.int32, torch.bfloat16):
    size = 12
    name = str(dtype)
    # all_reduce: every op
    expect_sum = sum(base(torch.float64, size, r) for r in range(n)).to(dtype)
    for op, want in ((dist.ReduceOp.SUM, expect_sum),
                     (dist.ReduceOp.MAX, base(dtype, size, n - 1)),
                     (dist.ReduceOp.MIN, base(dtype, size, 0)),
                     (dist.ReduceOp.PRODUCT, torch.stack([base(torch.float64, size, r)
                                                          for r in range(n)]).prod(0).to(dtype))):
        t = base(dtype, size)
        if op == dist.ReduceOp.PRODUCT and dtype == torch.bfloat16:
            continue  # products of these values are not exact in bf16
        dist.all_reduce(t, op=op)
        same(t, want, f"{name} all_reduce {op}")
    if dtype.is_floating_point and hasattr(dist.ReduceOp, "AVG") and args.backend == "chorus":
        t = (torch.arange(size) * n + rank).to(dtype) * 2
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        same(t, ((torch.arange(size) * n) * 2 + (n - 1)).to(dtype), f"{name} all_reduce avg")
    # broadcast from the last rank
    t = base(dtype, size)
    dist.broadcast(t, src=n - 1)
    same(t, base(dtype, size, n - 1), f"{name} broadcast")
    # reduce to rank 0
    t = base(dtype, size)
    dist.reduce(t, dst=0)
    if rank == 0:
        same(t, expect_sum, f"{name} reduce")
    # all_gather: list and into one tensor
    outs = [torch.empty(size, dtype=dtype) for _ in range(n)]
    dist.all_gather(outs, base(dtype, size))
    for r in range(n):
        same(outs[r], base(dtype, size, r), f"{name} all_gather[{r}]")
    flat = torch.empty(n * size, dtype=dtype)
    dist.all_gather_into_tensor(flat, base(dtype, size)) if hasattr(
        dist, "all_gather_into_tensor") else dist._all_gather_base(flat, base(dtype, size))
    same(flat, torch.cat([base(dtype, size, r) for r in range(n)]), f"{name} all_gather_into_tensor")
    # reduce_scatter: list and from one tensor
    ins = [base(dtype, size, rank) + r for r in range(n)]
    out = torch.empty(size, dtype=dtype)
    dist.reduce_scatter(out, ins)
    want = sum(base(torch.float64, size, q) + rank for q in range(n)).to(dtype)
    same(out, want, f"{name} reduce_scatter")
    out = torch.empty(size, dtype=dtype)
    rs = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    rs(out, torch.cat(ins))
    same(out, want, f"{name} reduce_scatter_tensor")
    # all_to_all_single, even and uneven
    src = torch.cat([torch.full((2,), 100 * rank + r) for r in range(n)]).to(dtype)
    dst = torch.empty(2 * n, dtype=dtype)
    dist.all_to_all_single(dst, src)
    same(dst, torch.cat([torch.full((2,), 100 * r + rank) for r in range(n)]).to(dtype),
         f"{name} all_to_all_single")
    # rank r sends r + p + 1 rows to rank p
    in_splits = [rank + p + 1 for p in range(n)]
    out_splits = [p + rank + 1 for p in range(n)]
    src = torch.cat([torch.full((s, 3), 10 * rank + p) for p, s in enumerate(in_splits)]).to(dtype)
    dst = torch.empty(sum(out_splits), 3, dtype=dtype)
    dist.all_to_all_single(dst, src, out_splits, in_splits)
    same(dst, torch.cat([torch.full((s, 3), 10 * p + rank) for p, s in enumerate(out_splits)])
         .to(dtype), f"{name} all_to_all_single uneven")
    # all_to_all with lists of different sizes
    ins = [torch.full((rank + p + 1,), 10 * rank + p).to(dtype) for p in range(n)]
    outs = [torch.empty(p + rank + 1, dtype=dtype) for p in range(n)]
    dist.all_to_all(outs, ins)
    for p in range(n):
        same(outs[p], torch.full((p + rank + 1,), 10 * p + rank).to(dtype), f"{name} all_to_all")
    # gather and scatter at rank n - 1
    root = n - 1
    outs = [torch.empty(size, dtype=dtype) for _ in range(n)] if rank == root else None
    dist.gather(base(dtype, size), outs, dst=root)
    if rank == root:
        for r in range(n):
            same(outs[r], base(dtype, size, r), f"{name} gather[{r}]")
    out = torch.empty(size, dtype=dtype)
    dist.scatter(out, [base(dtype, size, r) for r in range(n)] if rank == root else None, src=root)
    same(out, base(dtype, size, rank), f"{name} scatter")
    # send / recv around the ring, blocking and async (posted in the same order on every rank)
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    got = torch.empty(size, dtype=dtype)
    reqs = [dist.isend(base(dtype, size), nxt), dist.irecv(got, prv)]
    for q in reqs:
        q.wait()
    same(got, base(dtype, size, prv), f"{name} isend/irecv")
    if rank % 2 == 0:
        dist.send(base(dtype, size), nxt)
        if n % 2 == 0 or rank != 0:
            dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(base(dtype, size), nxt)
    if rank == 0 and n % 2 == 1:
        dist.recv(got, prv)
    same(got, base(dtype, size, prv), f"{name} send/recv")

# async collectives: several in flight, waited in reverse, futures resolve
ts = [torch.full((1000,), float(rank + k)) for k in range(4)]
works = [dist.all_reduce(t, async_op=True) for t in ts]
for w in reversed(works):
    w.wait()
for k, t in enumerate(ts):
    same(t, torch.full((1000,), float(sum(range(n)) + n * k)), f"async all_reduce {k}")
fut = dist.all_reduce(torch.ones(4), async_op=True).get_future()
same(fut.wait()[0], torch.full((4,), float(n)), "future")


def then_reduce_again(f):
    # A callback that itself waits for a collective of the same group (as
    # DDP comm hooks may): futures complete off the worker, so no deadlock.
    t2 = f.value()[0] + 1
    dist.all_reduce(t2)
    return t2


fut = dist.all_reduce(torch.ones(4), async_op=True).get_future().then(then_reduce_again)
same(fut.wait(), torch.full((4,), float(n * (n + 1))), "a collective inside a future callback")
# tensors in chorusMemAlloc memory (read in place by the other processes)
if args.backend == "chorus":
    import chorus.torch as ct
    for size in (5, 70000):
        t = ct.empty(size, dtype=torch.float32)
        t.copy_(base(torch.float32, size))
        dist.all_reduce(t)
        same(t, sum(base(torch.float64, size, r) for r in range(n)).to(torch.float32),
             f"shared all_reduce {size}")
        flat = ct.empty((n * size,), dtype=torch.float32)
        dist.all_gather_into_tensor(flat, t) if hasattr(
            dist, "all_gather_into_tensor") else dist._all_gather_base(flat, t)
        same(flat, t.repeat(n), f"shared all_gather {size}")
        del t, flat  # freed (chorusMemFree) while peers may still map them
dist.barrier()
# a device tensor or a bad op is an error, not a crash
if args.backend == "chorus":
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.bool))
        sys.exit("a bool tensor was accepted")
    except RuntimeError as e:
        assert "no Chorus data type for Bool" in str(e), e
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND)
        sys.exit("BAND was accepted")
    except RuntimeError as e:
        assert "reduction not supported" in str(e), e
    try:  # refused when posted, not inside the group that would issue it
        dist.isend(torch.zeros(2, dtype=torch.bool), (rank + 1) % n)
        sys.exit("a bool isend was accepted")
    except RuntimeError as e:
        assert "no Chorus data type for Bool" in str(e), e
    t = torch.ones(3)
    dist.all_reduce(t)  # the group still works after the refusals
    same(t, torch.full((3,), float(n)), "all_reduce after refused calls")
    # What the atexit hook does: a queued call runs, the threads stop, and
    # later calls are refused (not left waiting).
    t = torch.ones(5)
    w = dist.all_reduce(t, async_op=True)
    del t
    chorus.torch._torch.shutdown_all()
    assert w.is_completed(), "shutdown_all left a queued call"
    same(w.result()[0], torch.full((5,), float(n)), "all_reduce run by shutdown_all")
    try:
        dist.all_reduce(torch.ones(1))
        sys.exit("a call after shutdown_all was accepted")
    except RuntimeError as e:
        assert "was shut down" in str(e), e
dist.destroy_process_group()
print(f"rank {rank} of {n}: all operations ok")
