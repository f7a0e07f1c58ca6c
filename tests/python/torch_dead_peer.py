# A rank dies (os._exit) after the group is up, or (--silent) stays alive
# but never calls; the survivors' next collective must raise a RuntimeError
# naming the failure within CHORUS_TIMEOUT_S, not hang. Exit 0 when that
# happened on every survivor.
import os
import sys
import time

import torch
import torch.distributed as dist

import chorus.torch

rank, n = chorus.torch.init_process_group()
t = torch.ones(1000)
dist.all_reduce(t)  # everyone is up
assert t[0] == n
if rank == n - 1:
    if "--silent" in sys.argv:
        time.sleep(float(os.environ.get("CHORUS_TIMEOUT_S", "300")) + 3)
    os._exit(0)  # dies without a word
start = time.time()
try:
    for _ in range(5):
        dist.all_reduce(t)
    sys.exit(f"rank {rank}: collectives went on after rank {n - 1} died")
except RuntimeError as e:
    took = time.time() - start
    limit = float(os.environ.get("CHORUS_TIMEOUT_S", "300"))
    print(f"rank {rank}: raised after {took:.1f} s: {str(e).splitlines()[0][:160]}")
    if took > limit + 10:
        sys.exit(f"rank {rank}: the error came after {took:.1f} s (CHORUS_TIMEOUT_S={limit})")
os._exit(0)  # the group cannot be torn down politely with a dead member
