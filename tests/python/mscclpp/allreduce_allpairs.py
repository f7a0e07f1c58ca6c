# An in-place allreduce over memory channels: rank r reads chunk r of every
# peer and sums it into its own (rre), then puts the sum back into every
# peer's chunk r (fused into rres); one threadblock per chunk of a rank.
import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def allreduce(name, gpus, tbs):
    with CollectiveProgram(name, AllReduce(gpus, tbs, True), gpus, protocol="Simple"):
        ch = {}
        for r in range(gpus):
            for p in range(gpus):
                if p != r:
                    for tb in range(tbs):
                        ch[(p, r, tb)] = MemoryChannel(p, r)
        for r in range(gpus):
            for tb in range(tbs):
                for p in range(gpus):
                    if p != r:
                        ch[(p, r, tb)].signal(tb, relaxed=True)
                for p in range(gpus):
                    if p != r:
                        ch[(p, r, tb)].wait(tb, data_sync=SyncType.after, relaxed=True)
        for r in range(gpus):
            mine = Rank(r).get_input_buffer()
            for tb in range(tbs):
                i = r * tbs + tb
                for p in range(gpus):
                    if p != r:
                        theirs = Rank(p).get_input_buffer()[i : i + 1]
                        ch[(p, r, tb)].reduce(mine[i : i + 1], [theirs], tb)
                for p in range(gpus):
                    if p != r:
                        ch[(p, r, tb)].put(Rank(p).get_input_buffer()[i : i + 1], mine[i : i + 1], tb)
                for p in range(gpus):
                    if p != r:
                        ch[(p, r, tb)].signal(tb, data_sync=SyncType.before)
                for p in range(gpus):
                    if p != r:
                        ch[(p, r, tb)].wait(tb, data_sync=SyncType.after)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("gpus", type=int, nargs="?", default=4)
parser.add_argument("tbs", type=int, nargs="?", default=2)
args = parser.parse_args()
allreduce("allreduce_allpairs", args.gpus, args.tbs)
