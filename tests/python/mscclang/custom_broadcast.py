# A custom collective: rank 0's chunks reach every other rank's output, relayed
# along a chain (each rank forwards what it received).
import argparse

from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import Collective


class ChainBroadcast(Collective):
    def __init__(self, num_ranks, chunk_factor):
        Collective.__init__(self, num_ranks, chunk_factor, False)
        self.name = "chain_bcast"

    def init_buffers(self):
        buffers = []
        for r in range(self.num_ranks):
            inp = [Chunk(0, c, -1, c) if r == 0 else None for c in range(self.chunk_factor)]
            buffers.append({Buffer.input: inp, Buffer.output: [None] * self.chunk_factor})
        return buffers

    def check(self, prog):
        return all(prog.buffers[r][Buffer.output][c] == Chunk(0, c)
                   for r in range(1, self.num_ranks) for c in range(self.chunk_factor))


parser = argparse.ArgumentParser()
parser.add_argument("num_gpus", type=int)
parser.add_argument("chunks", type=int)
args = parser.parse_args()
with MSCCLProgram("chain_broadcast", line(args.num_gpus), ChainBroadcast(args.num_gpus, args.chunks),
                  1):
    for c in range(args.chunks):
        ref = chunk(0, Buffer.input, c).copy(0, Buffer.output, c)
        for r in range(1, args.num_gpus):
            ref = ref.copy(r, Buffer.output, c, ch=c % 2)
    XML()
    Check()
