"""NVIDIA machines: DGX-1 (NVLink counts as bandwidth), DGX A100, and a
machine's NVLinks read from `nvidia-smi topo -m` output."""

import re
import subprocess

from msccl.topologies.topology import Topology


def dgx1():
    # NVLinks per GPU pair of a DGX-1 (hybrid cube mesh): 2 on the rings, 1 elsewhere.
    links = [
        [0, 2, 1, 1, 2, 0, 0, 0],
        [2, 0, 1, 2, 0, 1, 0, 0],
        [1, 1, 0, 2, 0, 0, 2, 0],
        [1, 2, 2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2, 1, 1],
        [0, 1, 0, 0, 2, 0, 1, 2],
        [0, 0, 2, 0, 1, 1, 0, 2],
        [0, 0, 0, 1, 1, 2, 2, 0],
    ]
    return Topology("DGX1", links)


def dgx_a100():
    return Topology("DGX_A100", [[0 if s == d else 12 for s in range(8)] for d in range(8)])


def nvlink_only(nvidia_smi_topo=None):
    """The NVLinks of `nvidia-smi topo -m` (its text, or run it): NV# is the bandwidth."""
    if nvidia_smi_topo is None:
        nvidia_smi_topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True,
                                         text=True, check=True).stdout
    rows = [l.split() for l in nvidia_smi_topo.splitlines() if re.match(r"\s*GPU\d+\s", l)]
    n = len(rows)
    links = [[0] * n for _ in range(n)]
    for dst, row in enumerate(rows):
        for src, cell in enumerate(row[1:n + 1]):
            m = re.fullmatch(r"NV(\d+)", cell)
            if m:
                links[dst][src] = int(m.group(1))
    return Topology("NVLinkOnly", links)
