"""The DSL's enums and records, as MSCCL++ names them."""

import dataclasses as _dc
import enum as _enum


class SyncType(_enum.Enum):
    """Where a threadblock-wide sync (a ``nop``) goes around an operation."""
    none = "none"
    before = "before"
    after = "after"
    both = "both"

    def _bits(self):
        return {"none": 0, "before": 1, "after": 2, "both": 3}[self.value]

    @staticmethod
    def _of(bits):
        return [SyncType.none, SyncType.before, SyncType.after, SyncType.both][bits]

    def __or__(self, other):
        return SyncType._of(self._bits() | other._bits())

    def __and__(self, other):
        return SyncType._of(self._bits() & other._bits())

    def __xor__(self, other):
        return SyncType._of(self._bits() ^ other._bits())


class ReduceOperationType(_enum.Enum):
    sum = "sum"
    min = "min"
    max = "max"


class BufferType(_enum.Enum):
    input = "i"
    output = "o"
    scratch = "s"

    def __str__(self):
        return self.value


class ChannelType(_enum.Enum):
    port = "port"
    memory = "memory"
    switch = "switch"
    none = "none"

    def __str__(self):
        return self.value


class DataAccessType(_enum.Enum):
    read = "r"
    write = "w"
    both = "b"


class ReplicationPolicy(_enum.Enum):
    interleaved = "interleaved"
    none = "none"


class Instruction(_enum.Enum):
    """The operation names a plan's JSON carries."""
    nop = "nop"
    copy = "copy"
    copy_packet = "cpkt"
    unpack_packet = "upkt"
    reduce = "re"
    reduce_packet = "repkt"
    reduce_copy_packet = "recpkt"
    sem_acquire = "sem_acquire"
    sem_release = "sem_release"
    signal = "signal"
    wait = "wait"
    relaxed_signal = "rlxsignal"
    relaxed_wait = "rlxwait"
    barrier = "barrier"
    flush = "flush"
    get = "get"
    put = "put"
    put_packet = "ppkt"
    read_put_packet = "rppkt"
    put_with_signal = "pws"
    put_with_signal_and_flush = "pwsf"
    reduce_send = "res"
    reduce_send_packet = "respkt"
    reduce_copy_send_packet = "recspkt"
    read_reduce = "rre"
    read_reduce_send = "rres"
    group_store = "gstore"
    group_load_reduce = "glre"
    group_load_reduce_store = "glres"
    pipeline = "pipeline"

    def __str__(self):
        return self.value


@_dc.dataclass(frozen=True)
class Chunk:
    """``size`` chunks of ``rank``'s ``buffer`` from ``index``."""
    rank: int
    buffer: BufferType
    index: int
    size: int

    def to_dict(self):
        return {"rank": self.rank, "type": str(self.buffer), "index": self.index,
                "size": self.size}


@_dc.dataclass
class RankGroup:
    size: int
    ranks: list
