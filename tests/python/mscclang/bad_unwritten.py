# A mistake: the ring forwards a chunk from a rank that has not received it yet.
from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllGather

with MSCCLProgram("broken_ring", fully_connected(4), AllGather(4, 1, False), 1):
    for r in range(4):
        chunk(r, Buffer.input, 0).copy(r, Buffer.output, r)
    chunk(2, Buffer.output, 1).copy(3, Buffer.output, 1)  # line 9: rank 2 has nothing in slot 1
    XML()
    Check()
