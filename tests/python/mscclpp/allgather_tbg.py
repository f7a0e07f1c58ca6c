# An in-place allgather whose puts a group of threadblocks share, each its
# slice of the chunk; threadblock 0 signals and waits, barriers hold the
# group around the puts.
import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def allgather(name, gpus, group):
    with CollectiveProgram(name, AllGather(gpus, 1, True), gpus):
        tbg = ThreadBlockGroup(tb_list=list(range(group)))
        ch = {(p, r): MemoryChannel(p, r) for r in range(gpus) for p in range(gpus) if p != r}
        for r in range(gpus):
            rank = Rank(r)
            mine = rank.get_output_buffer()[r : r + 1]
            for p in range(gpus):
                if p != r:
                    ch[(p, r)].signal(tb=0, relaxed=True)
                    ch[(p, r)].wait(tb=0, data_sync=SyncType.after, relaxed=True)
            rank.barrier(tb_list=tbg.tb_list)
            for p in range(gpus):
                if p != r:
                    ch[(p, r)].put(Rank(p).get_output_buffer()[r : r + 1], mine, tb_group=tbg)
            rank.barrier(tb_list=tbg.tb_list)
            for p in range(gpus):
                if p != r:
                    ch[(p, r)].signal(tb=0, data_sync=SyncType.before)
                    ch[(p, r)].wait(tb=0, data_sync=SyncType.after)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("gpus", type=int, nargs="?", default=4)
parser.add_argument("group", type=int, nargs="?", default=4)
args = parser.parse_args()
allgather("allgather_tbg", args.gpus, args.group)
