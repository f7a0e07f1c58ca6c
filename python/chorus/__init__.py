"""Chorus from Python: collective algorithms you can prove, predict and run.

Algorithms (MSCCL XML or Chorus JSON files, built-in programs, your own
programs, synthesized schedules) are ``chorus.Algorithm`` objects:

    >>> import chorus
    >>> a = chorus.gen("ring_allreduce", ranks=4)      # a built-in program
    >>> a.verify().correct                             # proven by the verifier
    True
    >>> outs = a.run()                                 # on 4 CPU ranks, checked
    >>> chorus.simulate(a, "ring:4", bytes=1 << 30)["busbw"]   # GB/s on a topology

Write your own with ``chorus.Program`` (chunk journeys, as MSCCLang does;
mistakes point at your .py line), or run MSCCLang programs unchanged through
the ``msccl.language`` module installed with this package.

Every failure raises ``chorus.Error`` with the diagnostics attached; nothing
crashes the interpreter. See docs/python.md.
"""

import json as _json
import os as _os
import sys as _sys

from chorus._errors import Error
from chorus import _chorus

__version__ = _chorus.version
Diagnostic = _chorus.Diagnostic

__all__ = [
    "Error", "Diagnostic", "Algorithm", "Report", "Program", "Chunk", "Buffer",
    "load", "loads", "verify", "convert", "run", "simulate", "topology", "presets",
    "programs", "gen", "optimum", "synthesize", "report", "Comm", "unique_id", "group_start", "group_end",
]

# Files of this package and of the msccl module: frames in them are not the
# user's line.
_HERE = _os.path.dirname(_os.path.abspath(__file__))
_PACKAGE_DIRS = (_HERE + _os.sep, _os.path.join(_os.path.dirname(_HERE), "msccl") + _os.sep)


def _where():
    """The user's file and line: the first frame outside Chorus's packages."""
    f = _sys._getframe(1)
    while f is not None:
        name = _os.path.abspath(f.f_code.co_filename)
        if not name.startswith(_PACKAGE_DIRS):
            return f.f_code.co_filename, f.f_lineno
        f = f.f_back
    return "<unknown>", 0


class Report:
    """The verifier's verdict on an algorithm.

    ``correct``: no errors (the algorithm implements its collective in every
    call form it claims); ``diagnostics``: every finding (chorus.Diagnostic);
    ``forms``: per call form, ``{"inplace": bool, "proven": bool}``;
    ``semantics_checked``: False for a custom collective without a
    postcondition; ``root``: the inferred root of a rooted collective.
    ``bool(report)`` is ``correct``.
    """

    def __init__(self, d):
        self.correct = d["correct"]
        self.diagnostics = d["diagnostics"]
        self.forms = d["forms"]
        self.semantics_checked = d["semantics_checked"]
        self.root = d["root"]

    @property
    def errors(self):
        """The findings of severity error."""
        return [d for d in self.diagnostics if d.severity == "error"]

    def __bool__(self):
        return self.correct

    def __repr__(self):
        verdict = "correct" if self.correct else f"{len(self.errors)} error(s)"
        return f"<chorus.Report {verdict}, {len(self.diagnostics)} diagnostic(s)>"

    def __str__(self):
        lines = ["correct" if self.correct else "wrong"]
        lines += [str(d) for d in self.diagnostics]
        return "\n".join(lines)


class Algorithm:
    """A collective algorithm (Chorus's IR): from a file, a program, or synthesis.

    Attributes: ``name``, ``collective``, ``ranks``, ``protocol``,
    ``channels``, ``chunks`` (nchunksperloop), ``slice_bytes`` (the slice it
    was made for, Chorus's own; 0: the protocol's), ``inplace`` / ``outofplace``
    (the call forms it serves), ``count_quantum`` (every count it runs is a
    multiple), ``notes`` (non-error findings from reading or compiling),
    ``spec`` (a custom collective's postcondition JSON, when compiled).
    """

    def __init__(self, impl):
        self._a = impl

    name = property(lambda self: self._a.name)
    collective = property(lambda self: self._a.collective)
    ranks = property(lambda self: self._a.ranks)
    protocol = property(lambda self: self._a.protocol)
    channels = property(lambda self: self._a.channels)
    chunks = property(lambda self: self._a.chunks)
    slice_bytes = property(lambda self: self._a.slice_bytes)
    inplace = property(lambda self: self._a.inplace)
    outofplace = property(lambda self: self._a.outofplace)
    count_quantum = property(lambda self: self._a.count_quantum)
    notes = property(lambda self: self._a.notes)
    spec = property(lambda self: self._a.spec or None)

    def stats(self):
        """Threadblocks, steps and the most steps of one threadblock, as a dict."""
        return self._a.stats()

    def xml(self):
        """MSCCL XML, with every attribute the current MSCCL executor reads."""
        return self._a.xml()

    def json(self):
        """Chorus's JSON form of the same algorithm."""
        return self._a.json()

    def save(self, path):
        """Writes the algorithm to ``path``: JSON if it ends in .json, else MSCCL XML."""
        text = self.json() if str(path).endswith(".json") else self.xml()
        with open(path, "w") as f:
            f.write(text)

    def verify(self, target_msccl=False, spec=None):
        """Proves the algorithm (or finds where it goes wrong): a chorus.Report.

        ``target_msccl``: the MSCCL executor's limits become errors.
        ``spec``: a custom collective's postcondition (JSON text; a compiled
        custom program carries its own).
        """
        return Report(self._a.verify(target_msccl, spec))

    def run(self, inputs=None, *, count=0, dtype=None, op="sum", inplace=None, spec=None):
        """Runs the algorithm once on CPU ranks (threads of this process).

        With ``inputs`` (one numpy array per rank, the collective's input
        buffer), returns each rank's output array. Without, runs on data
        distinct per rank and chunk (``count`` elements by the collective's
        convention, default the smallest it serves), checks every output
        element against the collective's closed form (or a custom
        collective's postcondition), raises chorus.Error if any is wrong and
        returns the outputs (bf16 and fp8 as their bits: uint16 / uint8).
        ``op``: sum, prod, max, min, avg. ``inplace``: the call form (default:
        out of place where served). ``spec``: a custom collective's
        postcondition (JSON text) when the algorithm does not carry one.
        """
        if inputs is not None:
            inputs = list(inputs)
            if inputs and dtype is None and hasattr(inputs[0], "dtype"):
                dtype = str(inputs[0].dtype)  # numpy's names are Chorus's too
        dtype = dtype or "float32"
        return self._a.run(inputs, count, dtype, op, inplace, spec)

    def simulate(self, topo, bytes=1 << 20, **kw):
        """chorus.simulate(self, topo, bytes, ...)."""
        return simulate(self, topo, bytes, **kw)

    def __repr__(self):
        forms = "/".join(f for f, on in (("in-place", self.inplace),
                                         ("out-of-place", self.outofplace)) if on)
        return (f"<chorus.Algorithm {self.name!r}: {self.collective}, {self.ranks} ranks, "
                f"{forms}, {self.chunks} chunks, {self.protocol}>")


def _algorithm(a):
    if isinstance(a, Algorithm):
        return a
    if isinstance(a, (str, _os.PathLike)):
        return load(a)
    raise TypeError(f"expected a chorus.Algorithm or a file name, got {type(a).__name__}")


def load(path):
    """Reads an algorithm file (MSCCL XML, either dialect, or Chorus JSON).

    Raises chorus.Error naming file:line when it cannot be read; the
    verifier is not run (call .verify()).
    """
    return Algorithm(_chorus.load(_os.fspath(path)))


def loads(text, name="<string>"):
    """The same from the file's text; diagnostics name ``name``."""
    return Algorithm(_chorus.loads(text, name))


def verify(algorithm, target_msccl=False, spec=None):
    """Verifies an Algorithm or a file: a chorus.Report (see Algorithm.verify).

    ``spec`` may be a postcondition file name or its JSON text.
    """
    if isinstance(spec, (str, _os.PathLike)) and _os.path.exists(spec):
        with open(spec) as f:
            spec = f.read()
    return _algorithm(algorithm).verify(target_msccl, spec)


def convert(source, destination):
    """Reads ``source`` (XML or JSON) and writes ``destination`` in the format
    its extension names (.json: JSON, else MSCCL XML)."""
    a = load(source)
    a.save(destination)
    return a


def run(algorithm, inputs=None, **kw):
    """Runs an Algorithm or a file on CPU ranks (threads); see Algorithm.run."""
    return _algorithm(algorithm).run(inputs, **kw)


def simulate(algorithm, topo, bytes=1 << 20, *, element_size=4, inplace=None, slice_bytes=0,
             parts=0, slots=8, trace=False, timeline_step=0.0):
    """Predicts how long one call takes on a topology (docs/simulator.md).

    ``topo``: a preset ("dgx-a100", "dgx-a100:2", "ring:8", ...) or a
    topology JSON / NCCL topology XML file. ``parts``: what a step moves
    its slice in, each part holding a slot (0: the protocol's, as MSCCL's
    executor moves it; 1: whole, as Chorus's runtimes do, and as
    synthesize(..., target="chorus") simulates). Returns a dict: time (s), algbw
    and busbw (GB/s, nccl-tests' definitions), count, iterations,
    transfers, links (from, to, bandwidth, bytes, utilization[, timeline]),
    critical_path (rank, tb, step, type, start, end, waited), and the Chrome
    trace JSON when ``trace``.
    """
    a = _algorithm(algorithm)
    return a._a.simulate(str(topo), int(bytes), element_size, inplace, slice_bytes, int(parts),
                         slots, trace, float(timeline_step))


def topology(spec):
    """A topology as a dict: name, ranks, nodes (name, rank, box), links
    (from, to, bandwidth GB/s, latency s)."""
    return _chorus.topology(str(spec))


def presets():
    """The built-in topologies: name, arguments, description."""
    return _chorus.presets()


def programs():
    """The built-in programs of Chorus's language (what gen() builds)."""
    return _chorus.programs()


def gen(name, ranks, *, instances=1, protocol="Simple", inplace=False, blocked_instances=False,
        gpus_per_node=0, channels=1, chunk_factor=1, root=0, verify=True):
    """Compiles a built-in program (chorus.programs()) for ``ranks`` ranks and
    proves it (``verify``); returns the Algorithm. As ``chorus gen``."""
    a = _chorus.GenArgs()
    a.name, a.ranks, a.instances, a.protocol = name, ranks, instances, protocol
    a.inplace, a.blocked_instances, a.gpus_per_node = inplace, blocked_instances, gpus_per_node
    a.channels, a.chunk_factor, a.root = channels, chunk_factor, root
    return Algorithm(_chorus.gen(a, verify))


def _synth_args(collective, topo, ranks=None, root=0, **kw):
    a = _chorus.SynthArgs()
    a.collective = collective
    a.topo = str(topo)
    if ranks is not None:
        a.ranks = ranks if isinstance(ranks, str) else ",".join(str(r) for r in ranks)
    a.root = root
    for k, v in kw.items():
        if not hasattr(a, k):
            raise TypeError(f"synthesize() got an unexpected keyword argument {k!r}")
        setattr(a, k, v)
    return a


def optimum(collective, topo, *, ranks=None, root=0):
    """The bandwidth optimum of a collective on a topology and the cut that
    binds it (as ``chorus synth --bound-only --json``): a dict with algbw,
    busbw (GB/s), the exact fraction, the cut; alltoall: the LP's bound."""
    args = _synth_args(collective, topo, ranks, root, bound_only=True)
    text, _ = _chorus.synthesize(args)
    return _json.loads(text)


def synthesize(collective, topo, *, ranks=None, root=0, name="", protocol="Simple",
               inplace=False, max_pieces=64, instances=0, size=1 << 30, method="optimal",
               trees=4, headroom=-1, time_budget=30.0, target="msccl"):
    """Synthesizes a schedule for a collective on a topology (``chorus synth``):
    the optimum, the trees packed, lowered, verified and simulated at
    ``size``, within ``time_budget`` seconds (0: no limit). ``target``:
    "msccl" (within the MSCCL executor's limits) or "chorus" (Chorus's
    runtimes: any number of steps per threadblock). Returns
    ``(algorithm, info)``: the chorus.Algorithm and the dict ``chorus synth
    --json`` prints (optimum, forest, simulated busbw).
    Alltoall: the multicommodity LP's flows as relayed paths (out of place)."""
    args = _synth_args(collective, topo, ranks, root, name=name, protocol=protocol,
                       inplace=inplace, max_pieces=max_pieces, instances=instances, size=size,
                       method=method, trees=trees, headroom=headroom,
                       time_budget=time_budget, target=target)
    text, xml = _chorus.synthesize(args)
    info = _json.loads(text)
    if not xml:
        raise Error(f"no schedule for {collective} on {topo}")
    return loads(xml, info.get("collective", collective) + ".xml"), info


def report(*algorithms, topo=None, perf=(), output=None, title="", bytes=1 << 20,
           min_bytes=1 << 10, max_bytes=1 << 30, factor=4, detail_steps=20000,
           detail_ranks=()):
    """The HTML page ``chorus report`` writes (docs/report.md): each
    algorithm's flow and verdict and, with ``topo``, its simulated step
    times, critical path, link loads over time and busbw over sizes
    against the optimum; ``perf``: ``chorus perf --csv`` or
    bench/peer_compare.sh files plotted. ``algorithms``: files (paths) or
    chorus.Algorithm objects. Returns the page; ``output``: also written
    there."""
    a = _chorus.ReportArgs()
    items, labels = [], []
    for item in algorithms:
        if isinstance(item, Algorithm):
            items.append(item._a)
            labels.append(item.name)
        else:
            items.append(_os.fspath(item))
    a.perf = [_os.fspath(p) for p in perf]
    a.topo = "" if topo is None else str(topo)
    a.title, a.bytes, a.min_bytes, a.max_bytes = title, int(bytes), int(min_bytes), int(max_bytes)
    a.factor, a.detail_steps, a.detail_ranks = factor, detail_steps, list(detail_ranks)
    html = _chorus.report(a, items, labels)
    if output is not None:
        with open(output, "w", encoding="utf-8") as f:
            f.write(html)
    return html


class Buffer:
    """The buffers a program names: ``input``, ``output``; scratch buffers
    are made with Program.scratch(name)."""
    input = 0
    output = 1


class Chunk:
    """A reference to consecutive chunks of one rank's buffer, as a value of
    the program (what is there now). Operations record what happens and
    return the reference to their result; a misuse is recorded as a problem
    at the calling line (reported when the program is compiled)."""

    def __init__(self, program, impl):
        self._p = program
        self._c = impl

    rank = property(lambda self: self._c.rank)
    buffer = property(lambda self: self._c.buffer)
    index = property(lambda self: self._c.index)
    size = property(lambda self: self._c.size)
    valid = property(lambda self: self._c.valid)

    def copy(self, rank, buffer, index, *, sendtb=-1, recvtb=-1, channel=-1):
        """Copies these chunks to ``rank``'s ``buffer`` at ``index``; returns the copy."""
        f, l = _where()
        return Chunk(self._p, self._c.copy(rank, self._p._buffer(buffer), index, sendtb, recvtb,
                                           channel, f, l))

    def reduce(self, other, *, buffer=None, index=None, sendtb=-1, recvtb=-1, channel=-1):
        """Reduces ``other`` (same size, any rank) into these chunks and returns
        them; with ``buffer`` and ``index``, the result goes there on this
        rank instead and these chunks stay as they are."""
        f, l = _where()
        if buffer is None:
            return Chunk(self._p, self._c.reduce(other._c, sendtb, recvtb, channel, f, l))
        return Chunk(self._p, self._c.reduce_to(other._c, self._p._buffer(buffer), index, sendtb,
                                                recvtb, channel, f, l))

    def split(self, parts):
        """The same chunks as ``parts`` references of equal size."""
        f, l = _where()
        return [Chunk(self._p, c) for c in self._c.split(parts, f, l)]

    def __repr__(self):
        return f"<chorus.Chunk rank {self.rank} buffer {self.buffer} [{self.index}:+{self.size}]>"


class Program:
    """A collective algorithm written as the journeys of chunks (Chorus's
    language; docs/dsl.md, docs/python.md).

        p = chorus.Program("ring_allgather", "allgather", ranks=4)
        for r in range(4):
            c = p.chunk(r, chorus.Buffer.input, 0).copy(r, chorus.Buffer.output, r)
            for step in range(1, 4):
                c = c.copy((r + step) % 4, chorus.Buffer.output, r)
        algo = p.compile()        # compiled and proven, or chorus.Error at your line

    ``collective``: allreduce, allgather, reducescatter, alltoall, broadcast,
    reduce, gather, scatter, or a name of your own (a custom collective:
    state its meaning with postcondition()). ``chunk_factor``: chunks per
    rank's share. ``instances``: copies on channels of their own
    (``blocked_instances``: each instance's chunks together).
    """

    def __init__(self, name, collective, ranks, *, chunk_factor=1, inplace=False,
                 protocol="Simple", instances=1, blocked_instances=False, root=0,
                 gpus_per_node=0, channels=1, pair_threadblocks=True):
        f, l = _where()
        self._p = _chorus.Program(name, collective, ranks, chunk_factor, inplace, protocol,
                                  instances, blocked_instances, root, gpus_per_node, channels,
                                  pair_threadblocks, f, l)
        self.name = name
        self.collective = collective
        self.ranks = ranks
        self._scratch = {}

    input_chunks = property(lambda self: self._p.input_chunks)
    output_chunks = property(lambda self: self._p.output_chunks)

    @property
    def problems(self):
        """Misuses recorded so far (chorus.Diagnostic, each at its line)."""
        return self._p.problems

    def _buffer(self, buffer):
        if isinstance(buffer, int):
            return buffer
        return self.scratch(str(buffer))

    def scratch(self, name):
        """A scratch buffer of every rank (its id), sized by the largest index used."""
        if name not in self._scratch:
            self._scratch[name] = self._p.scratch(name)
        return self._scratch[name]

    def chunk(self, rank, buffer, index, size=1):
        """A reference to ``size`` chunks of ``rank``'s ``buffer`` from ``index``
        that hold data now (the input, at the start)."""
        f, l = _where()
        return Chunk(self, self._p.chunk(rank, self._buffer(buffer), index, size, f, l))

    def group(self, chunks):
        """Consecutive references of one buffer of one rank as one."""
        f, l = _where()
        return Chunk(self, self._p.group([c._c for c in chunks], f, l))

    def precondition(self, present):
        """Custom collectives: the (rank, input chunk) pairs that hold data at the start."""
        f, l = _where()
        self._p.precondition(list(present), f, l)

    def postcondition(self, rank, index, holds):
        """Custom collectives: output chunk ``index`` of ``rank`` holds the
        reduction of ``holds`` ((rank, input chunk) pairs; one: a copy)."""
        f, l = _where()
        self._p.postcondition(rank, index, list(holds), f, l)

    def require(self, ok, message):
        """A program's own condition on its options: a problem at the caller's line unless ok."""
        f, l = _where()
        return self._p.require(bool(ok), message, f, l)

    def compile(self, verify=True):
        """Compiles the program to an Algorithm and proves it (``verify``).

        Raises chorus.Error whose diagnostics point at the program's lines
        when it misuses a chunk, or when the result is not the collective.
        """
        return Algorithm(self._p.compile(verify))


from chorus._comm import Comm, group_end, group_start, unique_id  # noqa: E402,F401
