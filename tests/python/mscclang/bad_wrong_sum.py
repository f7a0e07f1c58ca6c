# A mistake MSCCLang's own checker lets through only if one forgets Check():
# the ring reduction skips the last rank, so no rank holds the full sum. The
# program is well-formed; the verifier finds the wrong result.
from msccl.language import *
from msccl.topologies import *
from msccl.language.collectives import AllReduce

size = 3
with MSCCLProgram("short_ring", fully_connected(size), AllReduce(size, 1, True), 1):
    c = chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0))
    c.copy(0, Buffer.input, 0)
    c.copy(2, Buffer.input, 0)
    XML()
    Check()
