"""Channels: a rank's one-sided connections to a peer (memory: NVLink
loads and stores; port: a proxy's puts, e.g. over InfiniBand) and switch
channels over a group of ranks (NVLS multicast)."""

from .internal.globals import get_program
from .internal.plan import Op, caller
from .internal.types import (BufferType, ChannelType, Chunk, ReduceOperationType,  # noqa: F401
                             SyncType)
from .thread_block_group import ThreadBlockGroup  # noqa: F401 (MSCCL++ re-exports it)


class _PeerChannel:
    """Lives on ``src_rank`` and connects it to ``dst_rank``. The k-th
    channel of a type from A to B pairs with the k-th from B to A: a signal
    on one is what a wait on the other takes."""

    channel_type = None
    _counts = {}

    def __init__(self, dst_rank, src_rank):
        prog = get_program()
        for r in (dst_rank, src_rank):
            if not 0 <= r < prog.num_ranks:
                raise RuntimeError(f"rank {r} is not one of the program's {prog.num_ranks}")
        if dst_rank == src_rank:
            raise RuntimeError(f"a channel connects two ranks, not rank {src_rank} to itself")
        self.dst_rank, self.src_rank = dst_rank, src_rank
        key = (src_rank, self.channel_type)
        self.channel_id = _PeerChannel._counts.get(key, 0)
        _PeerChannel._counts[key] = self.channel_id + 1
        prog.gpus[src_rank].channels[self.channel_type].append(dst_rank)

    @classmethod
    def reset(cls):
        _PeerChannel._counts = {}

    def _remote(self, t, c):
        gid = get_program().gpus[self.src_rank].remote_buffer(c.rank, c.buffer, self.channel_type)
        return ("r", c, t.remote(self.channel_type, gid))

    def _sync(self, name, tb, data_sync):
        where = caller()
        get_program().emit(self.src_rank, tb, None, lambda t, tbg: Op(
            name, where, channel_type=self.channel_type,
            channel_ids=[t.channel(self.channel_type, self.channel_id)], sync=data_sync))

    def _check(self, local, remote):
        if local.rank != self.src_rank:
            raise RuntimeError(f"the chunk {local} is not on the channel's rank {self.src_rank}")
        if remote.rank != self.dst_rank:
            raise RuntimeError(f"the chunk {remote} is not on the channel's peer {self.dst_rank}")

    def _put(self, name, dst_chunk, src_chunk, tb, tb_group, ids=False):
        self._check(src_chunk, dst_chunk)
        if dst_chunk.size != src_chunk.size:
            raise RuntimeError(f"{name}: the chunks' sizes differ ({src_chunk} -> {dst_chunk})")
        if name in ("ppkt", "rppkt") and dst_chunk.buffer != BufferType.scratch:
            raise RuntimeError("packets are put into scratch")
        if name == "rppkt" and src_chunk.buffer != BufferType.scratch:
            raise RuntimeError("read_put_packets forwards packets, which live in scratch")
        where = caller()
        get_program().emit(self.src_rank, tb, tb_group, lambda t, tbg: Op(
            name, where, src=[("l", src_chunk, None)], dst=[self._remote(t, dst_chunk)],
            channel_type=self.channel_type,
            channel_ids=[t.channel(self.channel_type, self.channel_id)] if ids else None,
            tbg=tbg))


class MemoryChannel(_PeerChannel):
    channel_type = ChannelType.memory

    def signal(self, tb, data_sync=SyncType.both, relaxed=False):
        self._sync("rlxsignal" if relaxed else "signal", tb, data_sync)

    def wait(self, tb, data_sync=SyncType.both, relaxed=False):
        self._sync("rlxwait" if relaxed else "wait", tb, data_sync)

    def put(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        self._put("put", dst_chunk, src_chunk, tb, tb_group)

    def put_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        self._put("ppkt", dst_chunk, src_chunk, tb, tb_group)

    def read_put_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        if tb is None and tb_group is None:
            raise ValueError("read_put_packets needs tb or tb_group")
        self._put("rppkt", dst_chunk, src_chunk, tb, tb_group)

    # The names of MSCCL++'s earlier DSL (MSCCLPPProgram's time).
    put_packet = put_packets
    read_put_packet = read_put_packets

    def get(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        self._check(dst_chunk, src_chunk)
        where = caller()
        get_program().emit(self.src_rank, tb, tb_group, lambda t, tbg: Op(
            "get", where, src=[self._remote(t, src_chunk)], dst=[("l", dst_chunk, None)],
            channel_type=self.channel_type,
            channel_ids=[t.channel(self.channel_type, self.channel_id)], tbg=tbg))

    def reduce(self, local_src_chunk, remote_src_chunks, tb=None, tb_group=None,
               local_dst_chunk=None, reduce_op=ReduceOperationType.sum):
        dst = local_src_chunk if local_dst_chunk is None else local_dst_chunk
        for c in remote_src_chunks:
            self._check(local_src_chunk, c)
            if c.size != local_src_chunk.size:
                raise RuntimeError(f"reduce: the chunks' sizes differ ({local_src_chunk}, {c})")
        where = caller()
        get_program().emit(self.src_rank, tb, tb_group, lambda t, tbg: Op(
            "rre", where,
            src=[("l", local_src_chunk, None)] + [self._remote(t, c) for c in remote_src_chunks],
            dst=[("l", dst, None)], channel_type=self.channel_type, reduce_op=reduce_op,
            tbg=tbg))


class PortChannel(_PeerChannel):
    channel_type = ChannelType.port

    def signal(self, tb, data_sync=SyncType.both):
        self._sync("signal", tb, data_sync)

    def wait(self, tb, data_sync=SyncType.both):
        self._sync("wait", tb, data_sync)

    def flush(self, tb, data_sync=SyncType.both):
        self._sync("flush", tb, data_sync)

    def put(self, dst_chunk, src_chunk, tb):
        self._put("put", dst_chunk, src_chunk, tb, None, ids=True)

    def put_with_signal(self, dst_chunk, src_chunk, tb):
        self._put("pws", dst_chunk, src_chunk, tb, None, ids=True)

    def put_with_signal_and_flush(self, dst_chunk, src_chunk, tb):
        self._put("pwsf", dst_chunk, src_chunk, tb, None, ids=True)

    def put_packets(self, dst_chunk, src_chunk, tb):
        self._put("ppkt", dst_chunk, src_chunk, tb, None, ids=True)

    def read_put_packets(self, dst_chunk, src_chunk, tb):
        self._put("rppkt", dst_chunk, src_chunk, tb, None, ids=True)

    put_packet = put_packets
    read_put_packet = read_put_packets


class SwitchChannel:
    """Multicast memory over ``buffer_type`` of every rank in ``rank_list``."""

    channel_type = ChannelType.switch

    class SwitchChannelRankView:
        def __init__(self, channel, rank):
            self._channel, self._rank = channel, rank

        def reduce(self, buffer_offset, size, dst_chunk, tb,
                   reduce_op=ReduceOperationType.sum):
            self._channel.reduce(self._rank, buffer_offset, size, dst_chunk, tb, reduce_op)

        def broadcast(self, src_chunk, buffer_offset, size, tb):
            self._channel.broadcast(self._rank, src_chunk, buffer_offset, size, tb)

    def __init__(self, rank_list, buffer_type):
        prog = get_program()
        for r in rank_list:
            if not 0 <= r < prog.num_ranks:
                raise RuntimeError(f"rank {r} is not one of the program's {prog.num_ranks}")
        self.rank_list = list(rank_list)
        self.buffer_type = buffer_type
        self.channel_ids = {}
        for r in self.rank_list:
            g = prog.gpus[r]
            self.channel_ids[r] = len(g.switches)
            g.switches.append((buffer_type, self.rank_list))

    @classmethod
    def reset(cls):
        pass

    def at_rank(self, rank):
        if rank not in self.channel_ids:
            raise RuntimeError(f"rank {rank} is not in the switch channel's {self.rank_list}")
        return SwitchChannel.SwitchChannelRankView(self, rank)

    def _fits(self, rank, chunk, buffer_offset, size):
        prog = get_program()
        if rank not in self.channel_ids or chunk.rank != rank:
            raise RuntimeError(f"the chunk {chunk} is not on rank {rank} of the switch channel")
        if chunk.size != size:
            raise RuntimeError(f"the chunk {chunk} is not {size} chunks")
        for r in self.rank_list:
            have = (prog.gpus[r].scratch_chunks if self.buffer_type == BufferType.scratch else
                    prog.buffers[r][self.buffer_type].size)
            if buffer_offset + size > have:
                raise RuntimeError(f"[{buffer_offset}, {buffer_offset + size}) is past rank {r}'s "
                                   f"{self.buffer_type.name} buffer ({have} chunks)")
        return Chunk(rank, self.buffer_type, buffer_offset, size)

    def _ref(self, t, rank, at):
        return ("s", at, t.channel(ChannelType.switch, self.channel_ids[rank]))

    def reduce(self, rank, buffer_offset, size, dst_chunk, tb,
               reduce_op=ReduceOperationType.sum):
        at = self._fits(rank, dst_chunk, buffer_offset, size)
        where = caller()
        get_program().emit(rank, tb, None, lambda t, tbg: Op(
            "glre", where, src=[self._ref(t, rank, at)], dst=[("l", dst_chunk, None)],
            channel_type=ChannelType.switch, reduce_op=reduce_op))

    def broadcast(self, rank, src_chunk, buffer_offset, size, tb):
        at = self._fits(rank, src_chunk, buffer_offset, size)
        where = caller()
        get_program().emit(rank, tb, None, lambda t, tbg: Op(
            "gstore", where, src=[("l", src_chunk, None)], dst=[self._ref(t, rank, at)],
            channel_type=ChannelType.switch))
