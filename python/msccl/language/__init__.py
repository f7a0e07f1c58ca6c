"""MSCCLang's language, compiled by Chorus (docs/python.md, "MSCCLang programs").

A program written for MSCCLang (msccl-tools) runs unchanged with Chorus
installed in its place:

    from msccl.language import *
    from msccl.topologies import *
    from msccl.language.collectives import AllReduce

    with MSCCLProgram("ring", fully_connected(4), AllReduce(4, 4, True), 1):
        ...chunk(r, Buffer.input, i).copy(...) / .reduce(...)...
        XML()
        Check()

The operations are recorded into a Chorus program (chorus.Program) at the
user's line, compiled by Chorus's compiler and proven by its verifier. What
differs from MSCCLang, on purpose:

* XML() prints only XML that the verifier proves; a wrong program prints its
  diagnostics (file:line of the .py) on stderr and exits with status 1.
* Check() is the verifier's verdict (and a custom collective's own check()):
  on failure it prints the diagnostics on stderr and exits with status 1,
  where MSCCLang prints and returns False with exit status 0.
* The XML carries every attribute the current MSCCL executor reads
  (outofplace, minBytes, maxBytes; coll "reducescatter").
* threadblock_policy=manual passes sendtb/recvtb/ch to Chorus's compiler
  as hints; instr_fusion, check_xml and dependence_nop are accepted (Chorus
  always fuses, checks and orders dependencies itself).
"""

import enum as _enum
import sys as _sys

import chorus as _chorus

__all__ = [
    "MSCCLProgram", "chunk", "create_scratch", "XML", "Check", "Print", "Buffer",
    "ThreadblockPolicy", "Chunk", "ReduceChunk", "ChunkRef", "Ref", "Instruction",
]


class Buffer(_enum.Enum):
    input = "i"
    output = "o"
    scratch = "s"

    def __str__(self):
        return self.value


class ThreadblockPolicy(_enum.Enum):
    auto = "auto"
    manual = "manual"


class Instruction(_enum.Enum):
    """The MSCCL XML step types."""
    nop = "nop"
    send = "s"
    recv = "r"
    recv_copy_send = "rcs"
    recv_reduce_send = "rrs"
    recv_reduce_copy = "rrc"
    recv_reduce_copy_send = "rrcs"
    copy = "cpy"
    reduce = "re"
    delete = "d"
    start = "st"

    def __str__(self):
        return self.value


class Chunk:
    """The data a slot holds: input chunk ``origin_index`` of ``origin_rank``,
    bound for ``dst_rank``'s output at ``dst_index`` (-1: every rank)."""

    def __init__(self, origin_rank, origin_index, dst_rank=-1, dst_index=-1):
        self.origin_rank = origin_rank
        self.origin_index = origin_index
        self.dst_rank = dst_rank
        self.dst_index = dst_index

    def reduce(self, dst, other):
        return ReduceChunk(dst, [self]).reduce(dst, other)

    def _parts(self):
        return [self]

    def __eq__(self, other):
        return (isinstance(other, Chunk) and self.origin_rank == other.origin_rank and
                self.origin_index == other.origin_index)

    def __hash__(self):
        return hash((self.origin_rank, self.origin_index))

    def __repr__(self):
        return f"Chunk({self.origin_rank}, {self.origin_index}, {self.dst_rank}, {self.dst_index})"


class ReduceChunk:
    """The reduction of several chunks (each counted as often as it was added)."""

    def __init__(self, creation_rank, chunks):
        self.creation_rank = creation_rank
        self.chunks = list(chunks)

    def reduce(self, dst, other):
        return ReduceChunk(dst, self._parts() + other._parts())

    def _parts(self):
        return list(self.chunks)

    def __eq__(self, other):
        key = lambda c: (c.origin_rank, c.origin_index)
        return (isinstance(other, ReduceChunk) and
                sorted(self.chunks, key=key) == sorted(other.chunks, key=key))

    def __hash__(self):
        return hash(tuple(sorted((c.origin_rank, c.origin_index) for c in self.chunks)))

    def __repr__(self):
        return f"ReduceChunk({self.creation_rank}, {self.chunks})"


_current = None


def _program():
    if _current is None:
        raise RuntimeError("No Program in context")
    return _current


class MSCCLProgram:
    """A program: its name, topology, collective, instances and options.

    Use it as a context manager; chunk(), XML() and Check() act on the
    program whose ``with`` block they run in.
    """

    def __init__(self, name, topo, collective, instances, protocol="Simple",
                 threadblock_policy=ThreadblockPolicy.auto, interleaved_replication=True,
                 instr_fusion=True, check_xml=True, dependence_nop=False):
        if protocol not in ("Simple", "LL", "LL128"):
            raise AssertionError(f"Unsupported protocol {protocol}")
        self.name = name
        self.topo = topo
        self.collective = collective
        self.instances = instances
        self.protocol = protocol
        self.threadblock_policy = threadblock_policy
        self.interleaved_replication = interleaved_replication
        self.instr_fusion = instr_fusion
        self.check_xml = check_xml
        self.dependence_nop = dependence_nop
        self.num_ranks = topo.num_nodes()
        if collective.num_ranks != self.num_ranks:
            raise AssertionError(f"the collective has {collective.num_ranks} ranks and the "
                                 f"topology {self.num_ranks} nodes")
        self.buffers = collective.init_buffers()
        known = collective._chorus_name()
        inputs = max(len(b.get(Buffer.input) or []) for b in self.buffers)
        outputs = max(len(b.get(Buffer.output) or []) for b in self.buffers)
        factor = collective.chunk_factor if known else max(inputs, outputs, 1)
        self._p = _chorus.Program(name, known or _custom_name(collective), self.num_ranks,
                                  chunk_factor=factor, inplace=collective.inplace,
                                  protocol=protocol, instances=instances,
                                  blocked_instances=not interleaved_replication)
        if not known:
            self._state_custom_collective()
        self._algorithm = None
        self._failure = None

    def _state_custom_collective(self):
        # MSCCLang's data model as Chorus conditions: the input slots that
        # hold a chunk are the precondition; each chunk's destination (dst
        # rank, dst index; rank -1: every rank) is a postcondition.
        present, post = [], {}
        for r, b in enumerate(self.buffers):
            for i, c in enumerate(b.get(Buffer.input) or []):
                if c is None:
                    continue
                present.append((r, i))
                if c.dst_index is None or c.dst_index < 0:
                    continue
                ranks = range(self.num_ranks) if c.dst_rank < 0 else [c.dst_rank]
                for d in ranks:
                    post[(d, c.dst_index)] = (c.origin_rank, c.origin_index)
        self._p.precondition(present)
        for (r, i), src in sorted(post.items()):
            self._p.postcondition(r, i, [src])

    def __enter__(self):
        global _current
        if _current is not None:
            raise RuntimeError("There is already a MSCCL Program in context")
        _current = self
        return self

    def __exit__(self, *exc):
        global _current
        _current = None
        return False

    # Chunk references -------------------------------------------------
    def _slots(self, rank, buffer, create=False):
        b = self.buffers[rank]
        if buffer not in b:
            if not create:
                raise KeyError(f"rank {rank} has no buffer {buffer!r}")
            b[buffer] = []
        return b[buffer]

    def _chorus_buffer(self, buffer):
        if buffer is Buffer.input:
            return _chorus.Buffer.input
        if buffer is Buffer.output:
            return _chorus.Buffer.output
        return self._p.scratch("scratch_" + repr(buffer))

    def get_ref(self, rank, buffer, index, size=1):
        buffer, index = self.collective.get_buffer_index(rank, buffer, index)
        return Ref(rank, buffer, index, size, self)

    def _record_values(self, src, dst):
        s = self._slots(src.rank, src.buffer)
        d = self._slots(dst.rank, dst.buffer, create=True)
        values = [s[src.index + i] if src.index + i < len(s) else None for i in range(src.size)]
        while len(d) < dst.index + dst.size:
            d.append(None)
        for i, v in enumerate(values):
            d[dst.index + i] = v

    def _reduce_values(self, dst, src):
        s = self._slots(src.rank, src.buffer)
        d = self._slots(dst.rank, dst.buffer)
        for i in range(dst.size):
            a = d[dst.index + i] if dst.index + i < len(d) else None
            b = s[src.index + i] if src.index + i < len(s) else None
            if a is not None and b is not None:
                d[dst.index + i] = a.reduce(dst.rank, b)

    def _hints(self, sendtb, recvtb, ch):
        manual = self.threadblock_policy == ThreadblockPolicy.manual
        return dict(sendtb=sendtb if manual else -1, recvtb=recvtb if manual else -1,
                    channel=ch if ch is not None else -1)

    def _link(self, src, dst):
        if src != dst and not self.topo.link(src, dst):
            self._p.require(False, f"no link from rank {src} to rank {dst} in topology "
                                   f"{self.topo.name}")
            return False
        return True

    # Compilation --------------------------------------------------------
    def _compile(self):
        if self._algorithm is None and self._failure is None:
            try:
                self._algorithm = self._p.compile()
            except _chorus.Error as e:
                self._failure = e
        return self._algorithm

    def generate_xml(self):
        """The verified MSCCL XML (raises chorus.Error if the program is wrong)."""
        if self._compile() is None:
            raise self._failure
        return self._algorithm.xml()

    def algorithm(self):
        """The compiled and verified chorus.Algorithm (raises chorus.Error if wrong)."""
        if self._compile() is None:
            raise self._failure
        return self._algorithm

    def check(self):
        """True when the verifier proves the program (and a custom collective's check() agrees)."""
        if self._compile() is None:
            return False
        own = self.collective.check(self)
        return own is None or bool(own)


def _custom_name(collective):
    name = getattr(collective, "name", "custom") or "custom"
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in str(name))


class ChunkRef:
    """``size`` consecutive slots from ``index`` of ``rank``'s ``buffer``."""

    def __init__(self, rank, buffer, index, size):
        self.rank = rank
        self.buffer = buffer
        self.index = index
        self.size = size

    def __eq__(self, other):
        return (isinstance(other, ChunkRef) and
                (self.rank, self.buffer, self.index, self.size) ==
                (other.rank, other.buffer, other.index, other.size))

    def __hash__(self):
        return hash((self.rank, self.buffer, self.index, self.size))

    def __repr__(self):
        return f"ChunkRef({self.rank}, {self.buffer!r}, {self.index}, {self.size})"


class Ref(ChunkRef):
    """A chunk reference of the program in context (what chunk() returns)."""

    def __init__(self, rank, buffer, index, size, prog, impl=None):
        super().__init__(rank, buffer, index, size)
        self.prog = prog
        self._c = impl

    def _impl(self):
        if self._c is None:
            p = self.prog
            self._c = p._p.chunk(self.rank, p._chorus_buffer(self.buffer), self.index, self.size)
        return self._c

    def copy(self, dst, buffer=None, index=-1, sendtb=-1, recvtb=-1, ch=-1):
        """Copies these slots to rank ``dst`` (same buffer and index when both
        are omitted; a scratch buffer without an index: appended); returns
        the reference to the copy, or None when it is these slots."""
        p = self.prog
        if buffer is None and index == -1:
            buffer, index = self.buffer, self.index
        elif index == -1 and buffer not in (Buffer.input, Buffer.output):
            index = len(p.buffers[dst].get(buffer, []))
        # MSCCLang maps the destination with the source rank (in-place allgather:
        # input chunk i of any rank names output slot rank * chunk_factor + i).
        buffer, index = p.collective.get_buffer_index(self.rank, buffer, index)
        dst_ref = Ref(dst, buffer, index, self.size, p)
        if dst_ref == self:
            return None
        if not p._link(self.rank, dst):
            return dst_ref
        src_c = self._impl()
        dst_ref._c = src_c.copy(dst, p._chorus_buffer(buffer), index, **p._hints(sendtb, recvtb, ch))
        p._record_values(self, dst_ref)
        p._algorithm = None
        return dst_ref

    def reduce(self, other_chunkref, sendtb=-1, recvtb=-1, ch=-1):
        """Reduces ``other_chunkref`` (any rank) into these slots; returns them."""
        p = self.prog
        if not p._link(other_chunkref.rank, self.rank):
            return self
        # The sender's threadblock is on the other rank, the receiver's here.
        h = p._hints(sendtb, recvtb, ch)
        result = self._impl().reduce(other_chunkref._impl(), **h)
        p._reduce_values(self, other_chunkref)
        p._algorithm = None
        return Ref(self.rank, self.buffer, self.index, self.size, p, result)

    def split(self, num):
        """``num`` references of size // num each."""
        if self.size % num != 0:
            raise AssertionError("Trying to split a chunk of uneven size")
        parts = self._impl().split(num)
        n = self.size // num
        if len(parts) != num:  # a misuse already reported at its line: carry on quietly
            return [Ref(self.rank, self.buffer, self.index + i * n, n, self.prog, self._c)
                    for i in range(num)]
        return [Ref(self.rank, self.buffer, self.index + i * n, n, self.prog, parts[i])
                for i in range(num)]

    def group(self, other):
        """One reference spanning these slots and ``other``'s (same rank and buffer)."""
        if self.rank != other.rank or self.buffer != other.buffer:
            raise AssertionError("Trying to group chunks of different ranks or buffers")
        first, second = sorted([self, other], key=lambda r: r.index)
        impl = self.prog._p.group([first._impl(), second._impl()])
        end = max(self.index + self.size, other.index + other.size)
        return Ref(self.rank, self.buffer, first.index, end - first.index, self.prog, impl)

    def _value(self, i=0):
        return self.prog._slots(self.rank, self.buffer)[self.index + i]

    def get_origin_rank(self, i=0):
        return self._value(i).origin_rank

    def get_origin_index(self, i=0):
        return self._value(i).origin_index

    def get_dst_rank(self, i=0):
        return self._value(i).dst_rank

    def get_dst_index(self, i=0):
        return self._value(i).dst_index

    def print_chunk_info(self, i=0):
        print(self._value(i))


def chunk(rank, buffer, index, size=1):
    """A reference to ``size`` slots of ``rank``'s ``buffer`` from ``index``."""
    p = _program()
    ref = p.get_ref(rank, buffer, index, size)
    ref._impl()  # a slot that holds nothing yet is reported at this line
    return ref


def create_scratch(rank, name):
    """Makes the scratch buffer ``name`` on ``rank`` (copies also make it)."""
    p = _program()
    p._slots(rank, name, create=True)


def _fail(prog, error):
    for d in error.diagnostics:
        print(str(d), file=_sys.stderr)
    summary = error.message.split(";")[0] if error.diagnostics else error.message
    print(f"{prog.name}: {summary}", file=_sys.stderr)
    _sys.stdout.flush()
    _sys.exit(1)


def XML():
    """Prints the program's MSCCL XML, compiled and proven by Chorus; a
    program that is wrong prints its diagnostics on stderr and exits 1."""
    p = _program()
    try:
        print(p.generate_xml(), end="")
    except _chorus.Error as e:
        _fail(p, e)


def Check():
    """The verifier's verdict: True when proven; else the diagnostics on
    stderr and exit status 1 (MSCCLang's Check only printed)."""
    p = _program()
    if p._compile() is None:
        _fail(p, p._failure)
    own = p.collective.check(p)
    if own is not None and not own:
        _fail(p, _chorus.Error(f"the collective's own check() rejects {p.name} (the verifier "
                               "proved it against the chunks' destinations)"))
    return True


def Print():
    """Prints a summary of the compiled program."""
    p = _program()
    a = p.algorithm()
    print(repr(a), a.stats())
