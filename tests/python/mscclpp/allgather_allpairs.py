# An in-place allgather over memory channels: each rank puts its chunk into
# every peer's output, then signals; the peer waits before the call ends.
import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def allgather(name, gpus):
    collective = AllGather(gpus, 1, True)
    with CollectiveProgram(name, collective, gpus, protocol="Simple"):
        channels = {}
        for src in range(gpus):
            for dst in range(gpus):
                if src != dst:
                    channels[(dst, src)] = MemoryChannel(dst, src)
        for src in range(gpus):
            rank = Rank(src)
            mine = rank.get_output_buffer()[src : src + 1]
            for dst in range(gpus):
                if dst == src:
                    continue
                ch = channels[(dst, src)]
                ch.signal(tb=0, relaxed=True)
                ch.wait(tb=0, data_sync=SyncType.after, relaxed=True)
                ch.put(Rank(dst).get_output_buffer()[src : src + 1], mine, tb=0)
                ch.signal(tb=0, data_sync=SyncType.before)
                ch.wait(tb=0, data_sync=SyncType.after)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("gpus", type=int, nargs="?", default=4)
args = parser.parse_args()
allgather("allgather_allpairs", args.gpus)
