"""The collectives a program implements, with their buffers (in chunks)."""

from .internal.types import BufferType  # noqa: F401 (MSCCL++ re-exports it)
from .rank import BaseBuffer


class Collective:
    def __init__(self, num_ranks, chunk_factor, inplace):
        self.num_ranks = num_ranks
        self.chunk_factor = chunk_factor
        self.inplace = inplace
        self.name = "custom"

    def _sizes(self):
        return self.chunk_factor, self.chunk_factor

    def init_buffers(self):
        i, o = self._sizes()
        return [{BufferType.input: BaseBuffer(r, BufferType.input, 0, i),
                 BufferType.output: BaseBuffer(r, BufferType.output, 0, o)}
                for r in range(self.num_ranks)]

    def check(self, prog):
        """Chorus proves the plan against the collective (JSON() does)."""
        return True


class TestCollective(Collective):
    def __init__(self, num_ranks, input_size, output_size):
        super().__init__(num_ranks, 1, False)
        self.name = "test"
        self.input_size, self.output_size = input_size, output_size

    def _sizes(self):
        return self.input_size, self.output_size


class AllGather(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.name = "allgather"

    def _sizes(self):
        return self.chunk_factor, self.num_ranks * self.chunk_factor


class AllReduce(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.name = "allreduce"

    def _sizes(self):
        n = self.num_ranks * self.chunk_factor
        return n, n


class ReduceScatter(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.name = "reducescatter"

    def _sizes(self):
        return self.num_ranks * self.chunk_factor, self.chunk_factor


class AllToAll(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.name = "alltoall"

    def _sizes(self):
        n = self.num_ranks * self.chunk_factor
        return n, n


class SendRecv(Collective):
    """Each rank's input to a peer's output, as the program says (no
    post-condition: Chorus proves it free of races and deadlocks only)."""

    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.name = "sendrecv"
