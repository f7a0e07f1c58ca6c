# In-place all-pairs allgather: rank r1's input chunk, named as input chunk 0
# of r2, lands in r2's output slot r1 (MSCCLang maps in-place input slots with
# the sending rank).
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllGather


def allgather_allpairs(size, instances, protocol):
    with MSCCLProgram("allgather_allpairs", fully_connected(size), AllGather(size, 1, True),
                      instances, protocol=protocol, threadblock_policy=ThreadblockPolicy.manual):
        for r1 in range(size):
            for r2 in range(size):
                if r1 != r2:
                    chunk(r1, Buffer.input, 0).copy(r2, Buffer.input, 0, sendtb=r2, recvtb=r1)
        XML()
        Check()


parser = argparse.ArgumentParser()
parser.add_argument("num_gpus", type=int)
parser.add_argument("instances", type=int)
parser.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="LL128")
args = parser.parse_args()
allgather_allpairs(args.num_gpus, args.instances, args.protocol)
