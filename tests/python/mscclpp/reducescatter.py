# An out-of-place reduce-scatter: rank r puts its copy of chunk p into a
# slot of p's scratch and signals; p waits, then sums its own chunk and the
# slots into its output.
import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def reducescatter(name, gpus):
    with CollectiveProgram(name, ReduceScatter(gpus, 1, False), gpus):
        scratch = [Buffer(r, gpus - 1) for r in range(gpus)]
        ch = {(p, r): MemoryChannel(p, r) for r in range(gpus) for p in range(gpus) if p != r}

        def slot(of, at):
            return of if of < at else of - 1

        for r in range(gpus):
            inp = Rank(r).get_input_buffer()
            for p in range(gpus):
                if p != r:
                    s = slot(r, p)
                    ch[(p, r)].put(scratch[p][s : s + 1], inp[p : p + 1], tb=0)
                    ch[(p, r)].signal(tb=0, data_sync=SyncType.before)
        for r in range(gpus):
            rank = Rank(r)
            for p in range(gpus):
                if p != r:
                    ch[(p, r)].wait(tb=0, data_sync=SyncType.after)
            slots = [scratch[r][s : s + 1] for s in range(gpus - 1)]
            rank.reduce(rank.get_input_buffer()[r : r + 1], slots, tb=0,
                        dst_chunk=rank.get_output_buffer()[0:1])
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("gpus", type=int, nargs="?", default=4)
args = parser.parse_args()
reducescatter("reducescatter", args.gpus)
