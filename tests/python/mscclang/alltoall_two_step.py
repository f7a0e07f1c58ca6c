# Two-step alltoall across nodes: chunks bound for another node gather at the
# local GPU with the destination's local index (scratch per node), cross the
# network as one message per node pair, then land where each chunk is bound
# (get_dst_rank / get_dst_index); chunks within a node go directly.
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllToAll


def alltoall_two_step(num_nodes, gpus_per_node, protocol):
    n = num_nodes * gpus_per_node
    topology = fully_connected(n)
    rank = lambda node, g: node * gpus_per_node + g
    with MSCCLProgram("hierarchical_all_to_all", topology, AllToAll(n, 1, False), 1,
                      protocol=protocol):
        for n1 in range(num_nodes):
            for g1 in range(gpus_per_node):
                for n2 in range(num_nodes):
                    for g2 in range(gpus_per_node):
                        src, dst = rank(n1, g1), rank(n2, g2)
                        c = chunk(src, Buffer.input, dst)
                        if n1 == n2:
                            c.copy(dst, Buffer.output, src)
                        else:
                            c.copy(rank(n1, g2), f"copy_{n2}")
        for n1 in range(num_nodes):
            for g1 in range(gpus_per_node):
                for n2 in range(num_nodes):
                    if n1 != n2:
                        c = chunk(rank(n1, g1), f"copy_{n2}", 0, gpus_per_node)
                        for k, part in enumerate(c.split(gpus_per_node)):
                            part.copy(part.get_dst_rank(), Buffer.output, part.get_dst_index())
        XML()
        Check()


parser = argparse.ArgumentParser()
parser.add_argument("num_nodes", type=int)
parser.add_argument("gpus_per_node", type=int)
parser.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="Simple")
args = parser.parse_args()
alltoall_two_step(args.num_nodes, args.gpus_per_node, args.protocol)
