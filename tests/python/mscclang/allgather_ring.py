# Out-of-place ring allgather: each rank copies its input into its own output
# slot, then passes it to the next rank around the ring.
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllGather


def allgather_ring(size, instances, protocol):
    with MSCCLProgram("allgather_ring", ring(size), AllGather(size, 1, False), instances,
                      protocol=protocol):
        for r in range(size):
            c = chunk(r, Buffer.input, 0)
            c = c.copy(r, Buffer.output, r, sendtb=0)
            nxt = (r + 1) % size
            while nxt != r:
                c = c.copy(nxt, Buffer.output, r)
                nxt = (nxt + 1) % size
        XML()
        Check()


parser = argparse.ArgumentParser()
parser.add_argument("num_gpus", type=int)
parser.add_argument("instances", type=int)
parser.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="Simple")
args = parser.parse_args()
allgather_ring(args.num_gpus, args.instances, args.protocol)
