# A planted mistake: allreduce_allpairs.py where rank 1 reads its peers'
# chunk 0 instead of chunk 1, so its sum, and every copy of it, is wrong
# (E301, at the read-reduce that wrote it).
from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *

gpus = 3
with CollectiveProgram("bad_wrong_reduction", AllReduce(gpus, 1, True), gpus):
    ch = {(p, r): MemoryChannel(p, r) for r in range(gpus) for p in range(gpus) if p != r}
    for r in range(gpus):
        for p in range(gpus):
            if p != r:
                ch[(p, r)].signal(tb=0, relaxed=True)
                ch[(p, r)].wait(tb=0, data_sync=SyncType.after, relaxed=True)
    for r in range(gpus):
        mine = Rank(r).get_input_buffer()
        for p in range(gpus):
            if p != r:
                c = 0 if r == 1 else r
                ch[(p, r)].reduce(mine[r : r + 1], [Rank(p).get_input_buffer()[c : c + 1]], tb=0)
        for p in range(gpus):
            if p != r:
                ch[(p, r)].put(Rank(p).get_input_buffer()[r : r + 1], mine[r : r + 1], tb=0)
        for p in range(gpus):
            if p != r:
                ch[(p, r)].signal(tb=0, data_sync=SyncType.before)
                ch[(p, r)].wait(tb=0, data_sync=SyncType.after)
    print(JSON())
