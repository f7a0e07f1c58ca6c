"""Topologies made from others."""

from msccl.topologies.topology import Topology


def reverse_topology(topology):
    n = topology.num_nodes()
    links = [[topology.link(dst, src) for src in range(n)] for dst in range(n)]
    switches = [(dsts, srcs, bw, name) for srcs, dsts, bw, name in topology.switches]
    return Topology(f"Reverse(topology={topology.name})", links, switches)


def binarize_topology(topology):
    links = [[1 if bw > 0 else 0 for bw in row] for row in topology.links]
    return Topology(f"Binarized(topology={topology.name})", links)
