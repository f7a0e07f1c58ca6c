"""Starts N copies of a Python script with the environment torchrun gives
its workers (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID), waits for all, and fails
(stopping the rest) when one fails or the deadline passes.

Debian 12's torchrun (torch 1.13 on Python 3.11) stops before starting any
worker (AttributeError in torch.distributed.elastic's to_map), so the tests
give the workers the same environment this way; with a working torchrun the
same scripts run under it unchanged.

Usage: torchrun_env.py [--nproc N] [--port P] [--timeout S] SCRIPT [ARGS...]
"""
import argparse
import os
import subprocess
import sys
import time

from ports import free_port


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args()
    port = a.port or free_port()
    procs = []
    for r in range(a.nproc):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.nproc),
                   LOCAL_WORLD_SIZE=str(a.nproc), GROUP_RANK="0", ROLE_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCHELASTIC_RUN_ID="chorus-test")
        procs.append(subprocess.Popen([sys.executable, a.script] + a.args, env=env))
    deadline = time.time() + a.timeout
    failed = None
    while any(q.poll() is None for q in procs):
        for r, q in enumerate(procs):
            if q.poll() not in (None, 0) and failed is None:
                failed = f"rank {r} exited with {q.returncode}"
        if failed or time.time() > deadline:
            break
        time.sleep(0.05)
    if failed is None and time.time() > deadline:
        failed = f"not done after {a.timeout} s"
    for q in procs:
        if q.poll() is None:
            q.kill()
            q.wait()
    if failed is None:
        failed = next((f"rank {r} exited with {q.returncode}" for r, q in enumerate(procs)
                       if q.returncode != 0), None)
    if failed:
        print(f"torchrun_env: {failed}", file=sys.stderr)
        sys.exit(1)


main()
