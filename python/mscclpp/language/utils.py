"""AlgoSpec (a program's parameters as one record) and ReplicationPolicy."""

import dataclasses as _dc

from .internal.types import ReplicationPolicy  # noqa: F401


@_dc.dataclass(frozen=True)
class AlgoSpec:
    name: str
    collective: object
    nranks_per_node: int
    world_size: int
    in_place: bool
    instances: int
    protocol: str
    instr_fusion: bool = True
    auto_sync: bool = True
    replication_policy: ReplicationPolicy = ReplicationPolicy.interleaved
    reuse_resources: bool = False
    num_threads_per_block: int = 1024
    use_double_scratch_buffer: bool = False
    buffer_alignment: int = 16
    min_message_size: int = 0
    max_message_size: int = 2**64 - 1
    tags: dict = _dc.field(default_factory=dict)
