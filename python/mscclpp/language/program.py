"""CollectiveProgram: the program being written, as MSCCL++'s DSL keeps it."""

from .channel import *  # noqa: F401,F403 (MSCCL++'s program module re-exports them)
from .collectives import *  # noqa: F401,F403
from .internal import plan as _plan
from .internal.globals import set_program
from .internal.types import ChannelType
from .utils import AlgoSpec, ReplicationPolicy  # noqa: F401


class CollectiveProgram:
    def __init__(self, name, collective, num_ranks, instances=1, protocol="Simple",
                 instr_fusion=True, auto_sync=True,
                 replication_policy=ReplicationPolicy.interleaved, reuse_resources=False,
                 num_threads_per_block=1024, use_double_scratch_buffer=False,
                 buffer_alignment=16, min_message_size=0, max_message_size=2**64 - 1):
        assert protocol in ("Simple", "LL"), f"protocol {protocol!r}: Simple or LL"
        self.name = name
        self.collective = collective
        self.num_ranks = num_ranks
        self.instances = instances
        self.protocol = protocol
        self.instr_fusion = instr_fusion
        self.auto_sync = auto_sync
        self.replication_policy = replication_policy
        self.reuse_resources = reuse_resources
        self.num_threads_per_block = num_threads_per_block
        self.use_double_scratch_buffer = use_double_scratch_buffer
        self.buffer_alignment = buffer_alignment
        self.min_message_size = min_message_size
        self.max_message_size = max_message_size
        self.buffers = collective.init_buffers()
        self.gpus = [_plan.Gpu(r, b[_plan.BufferType.input].size,
                               b[_plan.BufferType.output].size)
                     for r, b in enumerate(self.buffers)]
        self.loop_context = None
        self._barriers = {}
        self._written = None

    @classmethod
    def from_spec(cls, spec):
        return cls(spec.name, spec.collective, spec.world_size, instances=spec.instances,
                   protocol=spec.protocol, instr_fusion=spec.instr_fusion,
                   auto_sync=spec.auto_sync, replication_policy=spec.replication_policy,
                   reuse_resources=spec.reuse_resources,
                   num_threads_per_block=spec.num_threads_per_block,
                   use_double_scratch_buffer=spec.use_double_scratch_buffer,
                   buffer_alignment=spec.buffer_alignment,
                   min_message_size=spec.min_message_size,
                   max_message_size=spec.max_message_size)

    def __enter__(self):
        set_program(self)
        return self

    def __exit__(self, *exc):
        MemoryChannel.reset()  # noqa: F405
        PortChannel.reset()  # noqa: F405
        SwitchChannel.reset()  # noqa: F405
        from .rank import Semaphore
        Semaphore.reset()
        set_program(None)
        return False

    # --- what the DSL's objects call ---
    def set_loop_context(self, ctx):
        if ctx is not None and self.loop_context is not None:
            raise RuntimeError("Nested Pipelines are not Supported.")
        self.loop_context = ctx

    def add_operation(self, rank, tb, op):
        if self.loop_context is not None and op.name != "pipeline":
            self.loop_context.add_operation(rank, tb, op)
            return
        self.gpus[rank].threadblock(tb).ops.append(op)

    def emit(self, rank, tb, tb_group, make):
        """make(threadblock, tbg) -> Op, once per threadblock (of the group)."""
        if tb is None and tb_group is None:
            raise RuntimeError("Either 'tb' (a threadblock) or 'tb_group' (a ThreadBlockGroup) "
                               "must be provided")
        if tb_group is None:
            self.add_operation(rank, tb, make(self.gpus[rank].threadblock(tb), None))
            return
        for t in tb_group.tb_list:
            tbg = (tb_group.get_internal_id(t), tb_group.numtb())
            self.add_operation(rank, t, make(self.gpus[rank].threadblock(t), tbg))

    def barrier_id(self, rank, tbs):
        ids = self._barriers.setdefault(rank, {})
        return ids.setdefault(tbs, len(ids))

    def post_process_operations(self):
        if self._written is not None:
            return
        for g in self.gpus:
            for tb in g.tbs.values():
                ops = tb.ops
                if self.instr_fusion:
                    ops = _plan.fuse(ops)
                ops = _plan.add_data_syncs(ops)
                if self.auto_sync:
                    ops = _plan.auto_sync(ops)
                tb.ops = ops
        if self.replication_policy != ReplicationPolicy.interleaved and self.instances > 1:
            raise RuntimeError("instances > 1 replicate interleaved (MSCCL++'s 'none' policy "
                               "does not run either)")
        _plan.replicate(self.gpus, self.instances)
        self._written = _plan.plan_dict(self)

    def to_json(self, indent=2, **kwargs):
        """The plan as MSCCL++'s DSL writes it (not proven: JSON() proves it)."""
        import json
        self.post_process_operations()
        return json.dumps(self._written[0], indent=indent, **kwargs)

    def _origin(self, rank, tb, step, path=""):
        """(file, line) of what made op `step` of threadblock `tb` of `rank`
        (or the op at the start of a JSON path), else None."""
        import re
        self.post_process_operations()
        found = self._written[1].get((rank, tb, step))
        m = re.match(r"gpus\[\d+\]\.threadblocks\[\d+\]\.ops\[\d+\](\.ops\[\d+\])?", path)
        if found is None and m:
            found = self._written[1].get(m.group(0))
        return found


# Its name in MSCCL++'s earlier DSL.
MSCCLPPProgram = CollectiveProgram
