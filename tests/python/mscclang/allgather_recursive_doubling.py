# Recursive-doubling allgather: at distance 1, 2, 4, ... every rank sends the
# block it has gathered so far to the rank `distance` away (XOR).
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllGather


def allgather_recursive_doubling(size, instances, protocol):
    with MSCCLProgram("allgather_recursive_doubling", fully_connected(size),
                      AllGather(size, 1, True), instances, protocol=protocol,
                      threadblock_policy=ThreadblockPolicy.manual):
        count = 1
        while count < size:
            for rank in range(size):
                peer = rank ^ count
                index = (rank // count) * count
                chunk(rank, Buffer.output, index, count).copy(peer, Buffer.output, index,
                                                              sendtb=peer, recvtb=rank)
            count *= 2
        XML()
        Check()


parser = argparse.ArgumentParser()
parser.add_argument("num_gpus", type=int)
parser.add_argument("instances", type=int)
parser.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="Simple")
args = parser.parse_args()
allgather_recursive_doubling(args.num_gpus, args.instances, args.protocol)
