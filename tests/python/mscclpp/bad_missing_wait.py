# A planted mistake: reducescatter.py without the receiver's wait. Rank r
# sums the slots of its scratch before anything orders the peers' puts
# into them: a race (E705) at the reduce.
from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *

gpus = 3
with CollectiveProgram("bad_missing_wait", ReduceScatter(gpus, 1, False), gpus):
    scratch = [Buffer(r, gpus - 1) for r in range(gpus)]
    ch = {(p, r): MemoryChannel(p, r) for r in range(gpus) for p in range(gpus) if p != r}
    for r in range(gpus):
        for p in range(gpus):
            if p != r:
                s = r if r < p else r - 1
                ch[(p, r)].put(scratch[p][s : s + 1], Rank(r).get_input_buffer()[p : p + 1], tb=0)
                ch[(p, r)].signal(tb=0, data_sync=SyncType.before)
    for r in range(gpus):
        rank = Rank(r)
        slots = [scratch[r][s : s + 1] for s in range(gpus - 1)]
        rank.reduce(rank.get_input_buffer()[r : r + 1], slots, tb=0, dst_chunk=rank.get_output_buffer()[0:1])
        for p in range(gpus):
            if p != r:
                ch[(p, r)].wait(tb=0, data_sync=SyncType.after)
    print(JSON())
