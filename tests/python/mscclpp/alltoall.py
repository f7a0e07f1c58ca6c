# An out-of-place all-to-all: rank r copies its chunk r locally and puts
# chunk p into p's output at r, one threadblock per peer; a signal after the
# put, a wait before the call ends.
import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def alltoall(name, gpus):
    with CollectiveProgram(name, AllToAll(gpus, 1, False), gpus):
        ch = {(p, r): MemoryChannel(p, r) for r in range(gpus) for p in range(gpus) if p != r}
        for r in range(gpus):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            rank.copy(out[r : r + 1], inp[r : r + 1], tb=0)
            for p in range(gpus):
                if p == r:
                    continue
                tb = p if p < r else p - 1
                ch[(p, r)].put(Rank(p).get_output_buffer()[r : r + 1], inp[p : p + 1], tb=tb)
                ch[(p, r)].signal(tb=tb, data_sync=SyncType.before)
                ch[(p, r)].wait(tb=tb, data_sync=SyncType.after)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("gpus", type=int, nargs="?", default=4)
args = parser.parse_args()
alltoall("alltoall", args.gpus)
