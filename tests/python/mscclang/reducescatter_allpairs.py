# All-pairs reduce-scatter (in place): every rank sends block j to rank j's
# scratch, which reduces the blocks into its own.
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import ReduceScatter


def reducescatter_allpairs(size, protocol):
    with MSCCLProgram("reducescatter_pairs", fully_connected(size), ReduceScatter(size, size, True),
                      1, protocol=protocol, threadblock_policy=ThreadblockPolicy.manual,
                      dependence_nop=True):
        for r in range(size):
            for peer in range(size):
                if peer != r:
                    chunk(r, Buffer.input, peer * size, size).copy(peer, "scratch", sendtb=peer,
                                                                   recvtb=r)
        for r in range(size):
            for index in range(size * (size - 1)):
                c = chunk(r, Buffer.input, r * size + index % size)
                c.reduce(chunk(r, "scratch", index), sendtb=index % size)
        XML()
        Check()


parser = argparse.ArgumentParser()
parser.add_argument("num_gpus", type=int)
parser.add_argument("--protocol", choices=["Simple", "LL", "LL128"], default="LL")
args = parser.parse_args()
reducescatter_allpairs(args.num_gpus, args.protocol)
