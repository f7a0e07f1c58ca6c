"""The ``chorus`` backend of torch.distributed (docs/pytorch.md).

    import torch
    import torch.distributed as dist
    import chorus.torch                      # registers "chorus"
    dist.init_process_group("chorus")        # under torchrun: its environment
    # or chorus.torch.init_process_group()  # torchrun, chorus launch, mpirun or srun

CPU tensors: all_reduce (sum, avg, product, min, max), broadcast, reduce,
all_gather (list and into one tensor), reduce_scatter (both forms),
all_to_all and all_to_all_single (uneven splits too), gather, scatter,
send / recv / isend / irecv, barrier; async work objects and futures.
Timeouts and dead peers raise RuntimeError. Device tensors are refused
with a message until Chorus's CUDA backend serves them.
"""

import atexit
import datetime
import os

import torch
import torch.distributed as dist

from chorus import _torch

BACKEND = "chorus"


def _create(store, rank, size, timeout):
    return _torch.create_process_group(store, rank, size, timeout)


if BACKEND.upper() not in getattr(dist.Backend, "_plugins", {}):
    dist.Backend.register_backend(BACKEND, _create)

# At exit, before the interpreter finalizes: the groups' threads finish what
# is queued and stop, so none of them drops a Python-owned tensor (which
# takes the GIL) while the interpreter is being torn down, an abort.
atexit.register(_torch.shutdown_all)


def _first_slurm_host(nodes):
    """The first host of a Slurm host list, as the C library reads it
    (runtime::firstSlurmHost): "node[01-04,07],gpu3" -> "node01"."""
    host, i = "", 0
    while i < len(nodes) and nodes[i] != ",":
        if nodes[i] == "[":
            j = i + 1
            while j < len(nodes) and nodes[j].isdigit():
                j += 1
            close = nodes.find("]", i)
            if j == i + 1 or close < j:
                raise RuntimeError(f"chorus.torch: SLURM_STEP_NODELIST={nodes!r} is malformed")
            host += nodes[i + 1:j]
            i = close
        else:
            host += nodes[i]
        i += 1
    if not host:
        raise RuntimeError(f"chorus.torch: SLURM_STEP_NODELIST={nodes!r} names no host")
    return host


def _slurm_task(env):
    """(rank, world size, default rendezvous address) for a task of an srun
    step of two or more tasks, else None (a batch script's shell has no
    step; `srun --pty bash` has one task). The address is the one the C
    library's bootstrap derives: the step's first host, port 20000 +
    (job id x 16 + step id) mod 10000."""
    size = env.get("SLURM_STEP_NUM_TASKS", env.get("SLURM_NTASKS"))
    if "SLURM_STEP_NODELIST" not in env or "SLURM_PROCID" not in env or size in (None, "1"):
        return None
    job = int(env.get("SLURM_JOB_ID", env.get("SLURM_JOBID", "0")))
    step = int(env.get("SLURM_STEP_ID", env.get("SLURM_STEPID", "0")))
    address = (_first_slurm_host(env["SLURM_STEP_NODELIST"]),
               str(20000 + (job * 16 + step) % 10000))
    return int(env["SLURM_PROCID"]), int(size), address


def _launcher_environment():
    """rank, world size and, for Slurm, the default rendezvous address from
    torchrun's, chorus launch's, mpirun's or srun's environment."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return int(env["RANK"]), int(env["WORLD_SIZE"]), None
    if "CHORUS_RANK" in env and "CHORUS_WORLD_SIZE" in env:
        return int(env["CHORUS_RANK"]), int(env["CHORUS_WORLD_SIZE"]), None
    if "OMPI_COMM_WORLD_RANK" in env:
        return int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"]), None
    if "PMI_RANK" in env:
        return int(env["PMI_RANK"]), int(env["PMI_SIZE"]), None
    task = _slurm_task(env)
    if task is not None:
        return task
    raise RuntimeError("chorus.torch: no launcher environment (torchrun's RANK/WORLD_SIZE, "
                       "chorus launch's CHORUS_RANK/CHORUS_WORLD_SIZE, mpirun's "
                       "OMPI_COMM_WORLD_RANK/SIZE, or srun's SLURM_PROCID in a step)")


def init_process_group(timeout=datetime.timedelta(seconds=300), **kwargs):
    """dist.init_process_group("chorus") for a process started by torchrun,
    chorus launch, mpirun or srun: rank and world size from the launcher's
    environment; the rendezvous at MASTER_ADDR:MASTER_PORT (default
    127.0.0.1:29500, one host; under srun the step's first host and its
    job step's port) through torch's TCP store."""
    rank, size, slurm = _launcher_environment()
    addr = os.environ.get("MASTER_ADDR", slurm[0] if slurm else "127.0.0.1")
    port = os.environ.get("MASTER_PORT", slurm[1] if slurm else "29500")
    dist.init_process_group(BACKEND, init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=size, timeout=timeout, **kwargs)
    return rank, size


def empty(*size, dtype=torch.float32):
    """A zeroed CPU tensor in memory the job's other processes on this host
    read in place (chorusMemAlloc): collectives on it cost one copy per
    byte moved instead of a copy into shared memory and one out (or a
    system call per message). Freed with the tensor."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    return _torch.empty_shared([int(d) for d in size], torch.empty(0, dtype=dtype))
