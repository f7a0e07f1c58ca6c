# Recursive halving (reduce-scatter), then recursive doubling (allgather):
# log2(N) rounds each, partners at XOR distance.
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllReduce


def allreduce(size, instances, protocol):
    with MSCCLProgram("allreduce_recursive_doubling_halving", fully_connected(size),
                      AllReduce(size, size, True), instances, protocol=protocol,
                      interleaved_replication=False, threadblock_policy=ThreadblockPolicy.manual):
        count = size // 2
        while count >= 1:
            for rank in range(size):
                peer = rank ^ count
                index = ((peer // count) * count)
                c1 = chunk(rank, Buffer.input, index, size=count)
                chunk(peer, Buffer.output, index, size=count).reduce(c1, sendtb=peer, recvtb=rank,
                                                                      ch=0)
            count //= 2
        count = 1
        while count < size:
            for rank in range(size):
                peer = rank ^ count
                index = ((rank // count) * count)
                chunk(rank, Buffer.output, index, size=count).copy(peer, Buffer.output, index,
                                                                   sendtb=peer, recvtb=rank, ch=0)
            count *= 2
        XML()
        Check()


parser = argparse.ArgumentParser()
parser.add_argument("num_gpus", type=int)
parser.add_argument("instances", type=int)
parser.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="LL")
args = parser.parse_args()
allreduce(args.num_gpus, args.instances, args.protocol)
