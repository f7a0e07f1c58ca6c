# All-pairs alltoall: input block i of rank r goes straight to output block r of rank i.
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllToAll


def alltoall_allpairs(size, instances, protocol):
    with MSCCLProgram("alltoall_allpairs", fully_connected(size), AllToAll(size, 1, False),
                      instances, protocol=protocol):
        for r in range(size):
            for i in range(size):
                chunk(r, Buffer.input, i).copy(i, Buffer.output, r)
        XML()
        Check()


parser = argparse.ArgumentParser()
parser.add_argument("num_gpus", type=int)
parser.add_argument("instances", type=int)
parser.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="Simple")
args = parser.parse_args()
alltoall_allpairs(args.num_gpus, args.instances, args.protocol)
