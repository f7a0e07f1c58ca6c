# An in-place allreduce as a pipeline (LoopIterationContext): in each
# iteration threadblock 0 puts every peer its copy of the peer's chunk and
# waits for the peers' copies of its own; a semaphore hands over to
# threadblock 1, which sums them, puts the sum back to every peer and waits
# for theirs.
import argparse

from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *

from mscclpp.language.loop import *


def allreduce(name, gpus, unit):
    with CollectiveProgram(name, AllReduce(gpus, 1, True), gpus, reuse_resources=True):
        scratch = [Buffer(r, gpus - 1) for r in range(gpus)]
        data = {(p, r): MemoryChannel(p, r) for r in range(gpus) for p in range(gpus) if p != r}
        done = {(p, r): MemoryChannel(p, r) for r in range(gpus) for p in range(gpus) if p != r}
        ready = [Semaphore(r, 0) for r in range(gpus)]

        def slot(of, at):
            return of if of < at else of - 1

        with LoopIterationContext(unit=unit, num_chunks=1):
            for r in range(gpus):
                rank = Rank(r)
                inp = rank.get_input_buffer()
                peers = [p for p in range(gpus) if p != r]
                for p in peers:
                    s = slot(r, p)
                    data[(p, r)].put(scratch[p][s : s + 1], inp[p : p + 1], tb=0)
                for p in peers:
                    data[(p, r)].signal(tb=0, data_sync=SyncType.before)
                for p in peers:
                    data[(p, r)].wait(tb=0, data_sync=SyncType.after)
                ready[r].release(tb=0)
                ready[r].acquire(tb=1, data_sync=SyncType.after)
                rank.reduce(inp[r : r + 1], [scratch[r][slot(p, r) : slot(p, r) + 1] for p in peers],
                            tb=1)
                for p in peers:
                    done[(p, r)].put(Rank(p).get_input_buffer()[r : r + 1], inp[r : r + 1], tb=1)
                for p in peers:
                    done[(p, r)].signal(tb=1, data_sync=SyncType.before)
                for p in peers:
                    done[(p, r)].wait(tb=1, data_sync=SyncType.after)
        print(JSON())


parser = argparse.ArgumentParser()
parser.add_argument("gpus", type=int, nargs="?", default=4)
parser.add_argument("unit", type=int, nargs="?", default=2**16, help="bytes per iteration")
args = parser.parse_args()
allreduce("allreduce_pipeline", args.gpus, args.unit)
