#!/usr/bin/env python3
"""CuPy's NCCL bindings (cupy.cuda.nccl), unmodified, on libchorus-nccl.

  --procs N     N processes on GPU 0, each one rank (NcclCommunicator with the
                parent's unique id): the production shape, whose collectives
                run on each process's own kernels over CUDA IPC.
  --threads N   one process, N ranks on GPU 0 (NcclCommunicator.initAll).

Every rank checks allReduce (sum), allGather, reduceScatter, broadcast and a
ring of send/recv (where this CuPy has them) on values distinct per rank and
element, at a small size (LL slots) and a large one, exactly; every process
checks that libchorus-nccl is the NCCL it has loaded.

  LD_PRELOAD=build/gpu/src/nccl/libchorus-nccl.so python3 tests/nccl/cupy_check.py --procs 4
Exit 0 when every check passed.
"""
import argparse
import multiprocessing
import sys


def chorus_loaded():
    with open("/proc/self/maps") as f:
        return any("libchorus-nccl" in line for line in f)


def values(cp, rank, count):
    return (cp.arange(count, dtype=cp.float32) % 4096) + 10000 * rank


def check(name, got, want):
    import cupy as cp

    if not bool(cp.array_equal(got, want)):
        bad = cp.nonzero(got != want)[0][:4].get().tolist()
        raise AssertionError(f"{name}: differs at elements {bad}")


def run_ops(comms, ranks, n):
    """One round of every operation on `comms` (rank ranks[k] on comms[k]),
    each call grouped across the communicators of this process."""
    import cupy as cp
    from cupy.cuda import nccl

    stream = cp.cuda.Stream.null.ptr
    for count in (1000, 1 << 20):  # elements per rank
        x = {r: values(cp, r, count) for r in ranks}
        red = {r: cp.empty(count, dtype=cp.float32) for r in ranks}
        gat = {r: cp.empty(count * n, dtype=cp.float32) for r in ranks}
        big = {r: cp.concatenate([values(cp, r, count)] * n) for r in ranks}
        rs = {r: cp.empty(count, dtype=cp.float32) for r in ranks}
        bc = {r: (values(cp, 7, count) if r == n - 1 else cp.zeros(count, dtype=cp.float32))
              for r in ranks}
        for op in ("allReduce", "allGather", "reduceScatter", "broadcast"):
            nccl.groupStart()
            for c, r in zip(comms, ranks):
                if op == "allReduce":
                    c.allReduce(x[r].data.ptr, red[r].data.ptr, count, nccl.NCCL_FLOAT32,
                                nccl.NCCL_SUM, stream)
                elif op == "allGather":
                    c.allGather(x[r].data.ptr, gat[r].data.ptr, count, nccl.NCCL_FLOAT32, stream)
                elif op == "reduceScatter":
                    c.reduceScatter(big[r].data.ptr, rs[r].data.ptr, count, nccl.NCCL_FLOAT32,
                                    nccl.NCCL_SUM, stream)
                else:
                    c.broadcast(bc[r].data.ptr, bc[r].data.ptr, count, nccl.NCCL_FLOAT32, n - 1,
                                stream)
            nccl.groupEnd()
        cp.cuda.Device().synchronize()
        base = cp.arange(count, dtype=cp.float32) % 4096
        total = base * n + 10000 * n * (n - 1) / 2
        for r in ranks:
            check(f"rank {r} allReduce of {count}", red[r], total)
            check(f"rank {r} allGather of {count}", gat[r],
                  cp.concatenate([values(cp, q, count) for q in range(n)]))
            check(f"rank {r} reduceScatter of {count}", rs[r], total)
            check(f"rank {r} broadcast of {count}", bc[r], values(cp, 7, count))
        if hasattr(comms[0], "send"):
            got = {r: cp.full(count, -1.0, dtype=cp.float32) for r in ranks}
            nccl.groupStart()
            for c, r in zip(comms, ranks):
                c.send(x[r].data.ptr, count, nccl.NCCL_FLOAT32, (r + 1) % n, stream)
                c.recv(got[r].data.ptr, count, nccl.NCCL_FLOAT32, (r + n - 1) % n, stream)
            nccl.groupEnd()
            cp.cuda.Device().synchronize()
            for r in ranks:
                check(f"rank {r} recv of {count}", got[r], values(cp, (r + n - 1) % n, count))


def proc_rank(rank, n, uid, failures):
    try:
        import cupy as cp
        from cupy.cuda import nccl

        cp.cuda.Device(0).use()
        comm = nccl.NcclCommunicator(n, uid, rank)
        if not chorus_loaded():
            raise AssertionError("libchorus-nccl is not loaded (LD_PRELOAD it)")
        run_ops([comm], [rank], n)
        comm.destroy()
        print(f"rank {rank} of {n}: ok", flush=True)
    except Exception as e:  # reported by the parent
        failures.put(f"rank {rank}: {type(e).__name__}: {e}")


def main():
    p = argparse.ArgumentParser()
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--procs", type=int)
    g.add_argument("--threads", type=int)
    a = p.parse_args()
    import cupy as cp
    from cupy.cuda import nccl

    if a.threads:
        cp.cuda.Device(0).use()
        comms = nccl.NcclCommunicator.initAll([0] * a.threads)
        if not chorus_loaded():
            print("libchorus-nccl is not loaded (LD_PRELOAD it)")
            return 1
        run_ops(comms, list(range(a.threads)), a.threads)
        for c in comms:
            c.destroy()
        print(f"ok: {a.threads} ranks on GPU 0 in one process, every operation checked")
        return 0
    uid = nccl.get_unique_id()  # the rendezvous lives in this process
    ctx = multiprocessing.get_context("spawn")
    failures = ctx.Queue()
    ps = [ctx.Process(target=proc_rank, args=(r, a.procs, uid, failures)) for r in range(a.procs)]
    for q in ps:
        q.start()
    for q in ps:
        q.join(timeout=300)
    for q in ps:
        if q.is_alive():  # hung: reported below as exiting with None
            q.terminate()
    bad = []
    while not failures.empty():
        bad.append(failures.get())
    bad += [f"process {k} exited with {q.exitcode}" for k, q in enumerate(ps) if q.exitcode != 0]
    for b in bad:
        print(b)
    if not bad:
        print(f"ok: {a.procs} processes on GPU 0, every operation checked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
