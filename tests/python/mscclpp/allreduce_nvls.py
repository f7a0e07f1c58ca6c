# An in-place allreduce through a switch channel (NVLS multicast): rank r
# loads chunk r of every member, reduced, and stores the sum to every member
# (glre + gstore, fused into glres), between a ready and a done handshake.
import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def allreduce(name, gpus):
    with CollectiveProgram(name, AllReduce(gpus, 1, True), gpus, instances=2):
        nvls = SwitchChannel(rank_list=list(range(gpus)), buffer_type=BufferType.input)
        ch = {(p, r): MemoryChannel(p, r) for r in range(gpus) for p in range(gpus) if p != r}
        for r in range(gpus):
            for p in range(gpus):
                if p != r:
                    ch[(p, r)].signal(tb=0, relaxed=True)
            for p in range(gpus):
                if p != r:
                    ch[(p, r)].wait(tb=0, data_sync=SyncType.after, relaxed=True)
        for r in range(gpus):
            mine = Rank(r).get_input_buffer()[r : r + 1]
            nvls.at_rank(r).reduce(buffer_offset=r, size=1, dst_chunk=mine, tb=0)
            nvls.at_rank(r).broadcast(src_chunk=mine, buffer_offset=r, size=1, tb=0)
        for r in range(gpus):
            for p in range(gpus):
                if p != r:
                    ch[(p, r)].signal(tb=0, data_sync=SyncType.before)
            for p in range(gpus):
                if p != r:
                    ch[(p, r)].wait(tb=0, data_sync=SyncType.after)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("gpus", type=int, nargs="?", default=4)
args = parser.parse_args()
allreduce("allreduce_nvls", args.gpus)
