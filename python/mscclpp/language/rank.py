"""A rank's buffers and local operations, scratch buffers, semaphores."""

from .internal.globals import get_program
from .internal.plan import Op, caller
from .internal.types import BufferType, Chunk, ReduceOperationType, SyncType
from .thread_block_group import ThreadBlockGroup  # noqa: F401 (MSCCL++ re-exports it)


class BaseBuffer:
    """A rank's buffer; ``buf[a:b]`` is the chunk of its units a..b-1.
    (``size`` is the end index, as MSCCL++ keeps it.)"""

    def __init__(self, rank, buffer_type, offset, size):
        self.rank = rank
        self.buffer_type = buffer_type
        self.offset = offset
        self.size = offset + size

    def __getitem__(self, key):
        if not isinstance(key, slice):
            raise TypeError("a buffer is indexed by a slice: buf[a:b]")
        if key.step not in (None, 1):
            raise ValueError("a buffer's slice has no step")
        start = 0 if key.start is None else key.start
        stop = self.size - self.offset if key.stop is None else key.stop
        if start < 0 or stop < 0 or start > stop:
            raise ValueError(f"bad slice [{start}:{stop}]")
        if self.offset + stop > self.size:
            raise RuntimeError(f"Index range [{start}:{stop}] out of bounds of rank {self.rank}'s "
                               f"{self.buffer_type.name} buffer ({self.size - self.offset} chunks)")
        return Chunk(self.rank, self.buffer_type, self.offset + start, stop - start)


class Buffer(BaseBuffer):
    """``size`` chunks of ``rank``'s scratch, after the scratch made before."""

    def __init__(self, rank, size):
        prog = get_program()
        if not 0 <= rank < prog.num_ranks:
            raise RuntimeError(f"rank {rank} is not one of the program's {prog.num_ranks}")
        gpu = prog.gpus[rank]
        super().__init__(rank, BufferType.scratch, gpu.scratch_chunks, size)
        gpu.scratch_chunks += size


def _local(rank, *chunks):
    for c in chunks:
        if c.rank != rank:
            raise RuntimeError(f"Inconsistent ranks: the chunk {c} is not on rank {rank}")


def _same_size(*chunks):
    if len({c.size for c in chunks}) != 1:
        raise RuntimeError("the chunks' sizes differ: " + ", ".join(str(c) for c in chunks))


class Rank:
    def __init__(self, rank):
        prog = get_program()
        if rank >= prog.num_ranks:
            raise RuntimeError(f"rank {rank} is not one of the program's {prog.num_ranks}")
        self.rank = rank

    def get_input_buffer(self):
        return get_program().buffers[self.rank][BufferType.input]

    def get_output_buffer(self):
        return get_program().buffers[self.rank][BufferType.output]

    def _copy(self, dst_chunk, src_chunk, tb, tb_group, name):
        _local(self.rank, dst_chunk, src_chunk)
        _same_size(dst_chunk, src_chunk)
        if name == "cpkt" and dst_chunk.buffer != BufferType.scratch:
            raise RuntimeError("copy_packets writes packets, which live in scratch")
        if name == "upkt" and src_chunk.buffer != BufferType.scratch:
            raise RuntimeError("unpack_packets reads packets, which live in scratch")
        where = caller()
        get_program().emit(self.rank, tb, tb_group, lambda t, tbg: Op(
            name, where, src=[("l", src_chunk, None)], dst=[("l", dst_chunk, None)], tbg=tbg))

    def copy(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        self._copy(dst_chunk, src_chunk, tb, tb_group, "copy")

    def copy_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        self._copy(dst_chunk, src_chunk, tb, tb_group, "cpkt")

    def unpack_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        self._copy(dst_chunk, src_chunk, tb, tb_group, "upkt")

    # The names of MSCCL++'s earlier DSL.
    copy_packet = copy_packets
    unpack_packet = unpack_packets
    unpack_copy_packet = unpack_packets

    def reduce(self, src_chunk, other_chunks, tb=None, tb_group=None, dst_chunk=None,
               reduce_op=ReduceOperationType.sum, packet=False):
        dst_chunk = src_chunk if dst_chunk is None else dst_chunk
        if not other_chunks:
            raise RuntimeError("Other chunk empty.")
        _local(self.rank, src_chunk, dst_chunk, *other_chunks)
        _same_size(src_chunk, dst_chunk, *other_chunks)
        if packet and any(c.buffer != BufferType.scratch for c in other_chunks):
            raise RuntimeError("a packet reduce reads packets, which live in scratch")
        where = caller()
        get_program().emit(self.rank, tb, tb_group, lambda t, tbg: Op(
            "repkt" if packet else "re", where,
            src=[("l", c, None) for c in [src_chunk] + list(other_chunks)],
            dst=[("l", dst_chunk, None)], reduce_op=reduce_op, tbg=tbg))

    def barrier(self, tb_list):
        if not tb_list:
            raise RuntimeError("a barrier needs threadblocks")
        prog = get_program()
        bid = prog.barrier_id(self.rank, tuple(tb_list))
        where = caller()
        for tb in tb_list:
            prog.add_operation(self.rank, tb, Op("barrier", where, barrier_id=bid,
                                                 num_threadblocks=len(tb_list)))


class Semaphore:
    """A counter of ``rank``'s threadblocks: release adds one, acquire waits
    for one and takes it."""

    _counts = {}

    def __init__(self, rank, initial_value):
        prog = get_program()
        self.rank = rank
        self.id = Semaphore._counts.get(rank, 0)
        Semaphore._counts[rank] = self.id + 1
        self.initial_value = initial_value
        prog.gpus[rank].semaphores.append(initial_value)

    @classmethod
    def reset(cls):
        cls._counts = {}

    def _op(self, name, tb, data_sync):
        get_program().add_operation(self.rank, tb, Op(name, caller(), semaphore_ids=[self.id],
                                                      sync=data_sync))

    def acquire(self, tb, data_sync=SyncType.both):
        self._op("sem_acquire", tb, data_sync)

    def release(self, tb, data_sync=SyncType.both):
        self._op("sem_release", tb, data_sync)
