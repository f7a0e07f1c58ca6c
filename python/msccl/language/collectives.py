"""MSCCLang's collectives: what each rank's buffers hold at the start, where
every chunk must end, and how in-place calls share buffers."""

from msccl.language import Buffer, Chunk, ReduceChunk

__all__ = ["Collective", "AllReduce", "AllGather", "AllToAll", "ReduceScatter"]


class Collective:
    """A collective of ``num_ranks`` ranks with ``chunk_factor`` chunks per
    rank's share. A custom collective subclasses it: init_buffers() returns
    one dict per rank ({Buffer.input: [...], Buffer.output: [...]}) of
    Chunk(origin_rank, origin_index, dst_rank, dst_index) or None; Chorus
    proves that every chunk reaches its (dst_rank, dst_index) output slot
    (dst_rank -1: every rank's). check(prog) may add conditions of its own
    on prog.buffers."""

    def __init__(self, num_ranks, chunk_factor, inplace):
        self.num_ranks = num_ranks
        self.chunk_factor = chunk_factor
        self.inplace = inplace
        self.name = "custom"

    def init_buffers(self):
        return [{Buffer.input: [], Buffer.output: []} for _ in range(self.num_ranks)]

    def check(self, prog):
        return None

    def get_buffer_index(self, rank, buffer, index):
        return buffer, index

    def _chorus_name(self):
        """The Chorus collective this is, or None for a custom one."""
        return None


def _all_ranks_hold(prog, rank, buffer, index, want):
    have = prog.buffers[rank][buffer][index]
    if have != want:
        print(f"Rank {rank} chunk {index} is incorrect: should be {want}, given {have}")
        return False
    return True


class AllReduce(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.name = "allreduce"

    def init_buffers(self):
        out = []
        for r in range(self.num_ranks):
            inp = [Chunk(r, c, -1, c) for c in range(self.chunk_factor)]
            outp = inp if self.inplace else [None] * self.chunk_factor
            out.append({Buffer.input: inp, Buffer.output: outp})
        return out

    def check(self, prog):
        ok = True
        buf = Buffer.input if self.inplace else Buffer.output
        for c in range(self.chunk_factor):
            want = ReduceChunk(-1, [Chunk(r, c) for r in range(self.num_ranks)])
            for r in range(self.num_ranks):
                ok = _all_ranks_hold(prog, r, buf, c, want) and ok
        return ok

    def get_buffer_index(self, rank, buffer, index):
        if self.inplace and buffer == Buffer.output:
            return Buffer.input, index
        return buffer, index

    def _chorus_name(self):
        return "allreduce"


class AllGather(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.name = "allgather"

    def init_buffers(self):
        n, cf = self.num_ranks, self.chunk_factor
        out = []
        for r in range(n):
            outp = [None] * (n * cf)
            inp = [Chunk(r, c, -1, r * cf + c) for c in range(cf)]
            if self.inplace:
                for c in range(cf):
                    outp[r * cf + c] = inp[c]
            out.append({Buffer.input: inp, Buffer.output: outp})
        return out

    def check(self, prog):
        ok = True
        n, cf = self.num_ranks, self.chunk_factor
        for r in range(n):
            for i in range(n):
                for c in range(cf):
                    ok = _all_ranks_hold(prog, r, Buffer.output, i * cf + c, Chunk(i, c)) and ok
        return ok

    def get_buffer_index(self, rank, buffer, index):
        if self.inplace and buffer == Buffer.input:
            return Buffer.output, rank * self.chunk_factor + index
        return buffer, index

    def _chorus_name(self):
        return "allgather"


class AllToAll(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.name = "alltoall"

    def init_buffers(self):
        n, cf = self.num_ranks, self.chunk_factor
        out = []
        for r in range(n):
            inp = [Chunk(r, i, i // cf, i % cf + r * cf) for i in range(n * cf)]
            outp = inp if self.inplace else [None] * (n * cf)
            out.append({Buffer.input: inp, Buffer.output: outp})
        return out

    def check(self, prog):
        ok = True
        n, cf = self.num_ranks, self.chunk_factor
        buf = Buffer.input if self.inplace else Buffer.output
        for r in range(n):
            for i in range(n):
                for c in range(cf):
                    ok = _all_ranks_hold(prog, r, buf, i * cf + c, Chunk(i, r * cf + c)) and ok
        return ok

    def _chorus_name(self):
        return "alltoall"


class ReduceScatter(Collective):
    def __init__(self, num_ranks, chunk_factor, inplace):
        super().__init__(num_ranks, chunk_factor, inplace)
        self.name = "reducescatter"

    def init_buffers(self):
        n, cf = self.num_ranks, self.chunk_factor
        out = []
        for r in range(n):
            inp = [Chunk(r, i * cf + c, i, c) for i in range(n) for c in range(cf)]
            b = {Buffer.input: inp}
            if not self.inplace:
                b[Buffer.output] = [None] * cf
            out.append(b)
        return out

    def check(self, prog):
        ok = True
        n, cf = self.num_ranks, self.chunk_factor
        for r in range(n):
            for c in range(cf):
                want = ReduceChunk(-1, [Chunk(i, r * cf + c) for i in range(n)])
                if self.inplace:
                    ok = _all_ranks_hold(prog, r, Buffer.input, r * cf + c, want) and ok
                else:
                    ok = _all_ranks_hold(prog, r, Buffer.output, c, want) and ok
        return ok

    def get_buffer_index(self, rank, buffer, index):
        if self.inplace and buffer == Buffer.output:
            return Buffer.input, rank * self.chunk_factor + index
        return buffer, index

    def _chorus_name(self):
        return "reducescatter"
