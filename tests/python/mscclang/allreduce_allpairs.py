# All-pairs allreduce: every rank sends block j to rank j's scratch, rank j
# reduces its block locally over several threadblocks, then sends the sum to
# every rank.
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllReduce


def allreduce_allpairs(size, instances, protocol):
    topology = fully_connected(size)
    collective = AllReduce(size, size * size, True)
    with MSCCLProgram("allreduce_pairs", topology, collective, instances, protocol=protocol,
                      interleaved_replication=False, threadblock_policy=ThreadblockPolicy.manual,
                      dependence_nop=True):
        for r in range(size):
            for peer in range(size):
                if peer != r:
                    c = chunk(r, Buffer.input, peer * size, size)
                    c.copy(peer, "scratch", sendtb=peer, recvtb=r)
        for r in range(size):
            for index in range(size * (size - 1)):
                c = chunk(r, Buffer.input, r * size + index % size)
                c.reduce(chunk(r, "scratch", index), sendtb=index % size)
        for r in range(size):
            for peer in range(size):
                if peer != r:
                    c = chunk(r, Buffer.input, r * size, size)
                    c.copy(peer, Buffer.input, r * size, sendtb=peer, recvtb=r)
        XML()
        Check()


parser = argparse.ArgumentParser()
parser.add_argument("num_gpus", type=int)
parser.add_argument("instances", type=int)
parser.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="LL")
args = parser.parse_args()
allreduce_allpairs(args.num_gpus, args.instances, args.protocol)
