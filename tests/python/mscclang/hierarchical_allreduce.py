# Hierarchical allreduce on nodes of GPUs: a ring reduce-scatter inside each
# node, a ring allreduce across nodes among GPUs with the same local index,
# then a ring allgather inside each node.
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllReduce


def hierarchical(gpus, nodes, instances, protocol):
    n = gpus * nodes
    topology = distributed_fully_connected(fully_connected(gpus), nodes, 1)
    with MSCCLProgram("hierarchical_allreduce", topology, AllReduce(n, n, True), instances,
                      protocol=protocol):
        # Inside node m: local GPU g ends with the node's sum of block g (chunks g*nodes..).
        for m in range(nodes):
            for g in range(gpus):
                for k in range(nodes):
                    index = g * nodes + k
                    c = chunk(m * gpus + (g + 1) % gpus, Buffer.input, index)
                    for step in range(1, gpus):
                        nxt = m * gpus + (g + 1 + step) % gpus
                        c = chunk(nxt, Buffer.input, index).reduce(c)
        # Across nodes: GPU g of node m reduces chunk g*nodes+m around the ring of GPU g's.
        for g in range(gpus):
            for k in range(nodes):
                index = g * nodes + k
                c = chunk(((k + 1) % nodes) * gpus + g, Buffer.input, index)
                for step in range(1, nodes):
                    c = chunk(((k + 1 + step) % nodes) * gpus + g, Buffer.input, index).reduce(c)
                for step in range(1, nodes):
                    c = c.copy(((k + step) % nodes) * gpus + g, Buffer.input, index)
        # Inside each node: GPU g sends its summed block around the node.
        for m in range(nodes):
            for g in range(gpus):
                for k in range(nodes):
                    index = g * nodes + k
                    c = chunk(m * gpus + g, Buffer.input, index)
                    for step in range(1, gpus):
                        c = c.copy(m * gpus + (g + step) % gpus, Buffer.input, index)
        XML()
        Check()


parser = argparse.ArgumentParser()
parser.add_argument("num_gpus", type=int)
parser.add_argument("num_nodes", type=int)
parser.add_argument("instances", type=int)
parser.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="Simple")
args = parser.parse_args()
hierarchical(args.num_gpus, args.num_nodes, args.instances, args.protocol)
