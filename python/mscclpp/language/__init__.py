"""MSCCL++'s DSL (``mscclpp.language``) over Chorus (docs/python.md).

A program written for MSCCL++ runs unchanged:

    from mscclpp.language.channel import *
    from mscclpp.language.rank import *
    from mscclpp.language.general import *
    from mscclpp.language.program import *
    from mscclpp.language.collectives import *

    with CollectiveProgram("allgather", AllGather(2, 1, True), 2):
        ...MemoryChannel(peer, rank).put(...) / .signal(...) / .wait(...)...
        print(JSON())

The operations are kept as MSCCL++'s DSL keeps them and go through the same
passes (fusion, data syncs, automatic syncs, instances). What differs, on
purpose: JSON() returns only a plan Chorus has proven; a wrong program
prints the verifier's findings at the lines of the .py that made the
faulty operations, on stderr, and exits with status 1.
"""

from .channel import *  # noqa: F401,F403
from .collectives import *  # noqa: F401,F403
from .general import JSON  # noqa: F401
from .internal.types import *  # noqa: F401,F403
from .loop import LoopIterationContext  # noqa: F401
from .program import CollectiveProgram  # noqa: F401
from .rank import *  # noqa: F401,F403
from .thread_block_group import ThreadBlockGroup  # noqa: F401
from .utils import AlgoSpec, ReplicationPolicy  # noqa: F401
