# An in-place allreduce in LL packets: every rank puts its copy of chunk p
# into p's scratch as packets; p sums them (repkt) and puts the sum to every
# peer as packets (fused into respkt); each rank unpacks the sums it gets.
# Packets carry their own flags: no signal or wait.
import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *


def allreduce(name, gpus):
    with CollectiveProgram(name, AllReduce(gpus, 1, True), gpus, protocol="LL",
                           use_double_scratch_buffer=True, auto_sync=False):
        scratch = [Buffer(r, 2 * (gpus - 1)) for r in range(gpus)]
        ch = {(p, r): MemoryChannel(p, r) for r in range(gpus) for p in range(gpus) if p != r}

        def slot(of, at):  # where rank 'of' writes in rank 'at''s scratch
            return of if of < at else of - 1

        for r in range(gpus):
            inp = Rank(r).get_input_buffer()
            for p in range(gpus):
                if p != r:
                    s = slot(r, p)
                    ch[(p, r)].put_packets(scratch[p][s : s + 1], inp[p : p + 1], tb=0)
        for r in range(gpus):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            peers = [p for p in range(gpus) if p != r]
            got = [scratch[r][slot(p, r) : slot(p, r) + 1] for p in peers]
            rank.reduce(inp[r : r + 1], got, tb=0, packet=True)
            for p in peers:
                s = gpus - 1 + slot(r, p)
                ch[(p, r)].put_packets(scratch[p][s : s + 1], inp[r : r + 1], tb=0)
        for r in range(gpus):
            rank = Rank(r)
            inp = rank.get_input_buffer()
            for p in range(gpus):
                if p != r:
                    s = gpus - 1 + slot(p, r)
                    rank.unpack_packets(inp[p : p + 1], scratch[r][s : s + 1], tb=1)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("gpus", type=int, nargs="?", default=4)
args = parser.parse_args()
allreduce("allreduce_packets", args.gpus)
