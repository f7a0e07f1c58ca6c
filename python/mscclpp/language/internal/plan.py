"""A program's operations per rank and threadblock, the passes MSCCL++'s DSL
runs on them before it writes the plan (fusion, data syncs, automatic
syncs, instances), and the plan's JSON. Every operation remembers the line
of the user's program that made it, so the verifier's findings (rank /
threadblock / op index) are reported at that line."""

import copy as _copy
import os as _os
import sys as _sys

from .types import BufferType, ChannelType, SyncType

_HERE = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))


def caller():
    """(file, line) of the innermost frame outside this package."""
    f = _sys._getframe(1)
    while f is not None:
        path = _os.path.abspath(f.f_code.co_filename)
        if not path.startswith(_HERE + _os.sep):
            return (f.f_code.co_filename, f.f_lineno)
        f = f.f_back
    return ("<unknown>", 0)


def local_ref(c):
    return {"type": str(c.buffer), "index": c.index, "size": c.size}


class Op:
    """One operation of a threadblock, as the plan writes it."""

    SYNC_OPS = {"signal", "wait", "rlxsignal", "rlxwait", "flush", "sem_acquire", "sem_release"}

    def __init__(self, name, where, **fields):
        self.name = name
        self.where = where
        self.sync = fields.pop("sync", SyncType.none)
        # Set by the DSL: src/dst lists of (kind, chunk, id), kind "l" local,
        # "r" remote (id: the threadblock's remote buffer ref), "s" switch
        # (id: the threadblock's switch channel); channel_type/channel_ids;
        # tbg (tb_id, tbg_size); barrier_id/num_threadblocks; semaphore_ids;
        # reduce_op; ops/iter_context (pipeline).
        self.src = fields.pop("src", None)
        self.dst = fields.pop("dst", None)
        self.channel_type = fields.pop("channel_type", None)
        self.channel_ids = fields.pop("channel_ids", None)
        self.tbg = fields.pop("tbg", None)
        self.barrier_id = fields.pop("barrier_id", None)
        self.num_threadblocks = fields.pop("num_threadblocks", None)
        self.semaphore_ids = fields.pop("semaphore_ids", None)
        self.reduce_op = fields.pop("reduce_op", None)
        self.ops = fields.pop("ops", None)
        self.iter_context = fields.pop("iter_context", None)
        assert not fields, fields

    def clone(self):
        return _copy.deepcopy(self)

    # --- what it touches in its own rank (automatic syncs) ---
    def local_accesses(self):
        """[(buffer, first, end, writes)] of local entries not in packet form."""
        out = []
        packet_src = {"upkt": {0}, "rppkt": {0}, "repkt": None, "recpkt": None, "recspkt": None,
                      "respkt": None}
        packet_dst = {"cpkt": {0}, "ppkt": None, "rppkt": None}
        for side, entries in (("src", self.src), ("dst", self.dst)):
            for i, (kind, c, _) in enumerate(entries or []):
                if kind != "l":
                    continue
                if side == "src" and self.name in packet_src:
                    skip = packet_src[self.name]
                    if skip is None and i >= 1 or skip is not None and i in skip:
                        continue
                if side == "dst" and self.name in packet_dst:
                    skip = packet_dst[self.name]
                    if skip is None or i in skip:
                        continue
                out.append((c.buffer, c.index, c.index + c.size, side == "dst"))
        return out

    def to_dict(self):
        d = {"name": self.name}

        def ref(kind, c, ident):
            if kind == "l":
                return local_ref(c)
            key = "buffer_id" if kind == "r" else "switch_channel_id"
            return {key: ident, "index": c.index, "size": c.size}

        if self.src is not None:
            d["src_buff"] = [ref(*e) for e in self.src]
        if self.dst is not None:
            d["dst_buff"] = [ref(*e) for e in self.dst]
        if self.channel_ids is not None:
            d["channel_ids"] = list(self.channel_ids)
        if self.channel_type is not None:
            d["channel_type"] = str(self.channel_type)
        if self.reduce_op is not None:
            d["reduce_op"] = self.reduce_op.value
        if self.tbg is not None:
            d["tbg_info"] = {"tb_id": self.tbg[0], "tbg_size": self.tbg[1]}
        if self.barrier_id is not None:
            d["barrier_id"] = self.barrier_id
            d["num_threadblocks"] = self.num_threadblocks
        if self.semaphore_ids is not None:
            d["semaphore_ids"] = list(self.semaphore_ids)
        if self.name == "pipeline":
            d["iter_context"] = {"unit_size": self.iter_context[0],
                                 "num_chunks": self.iter_context[1]}
            d["ops"] = [o.to_dict() for o in self.ops]
        return d


class Threadblock:
    def __init__(self, tb):
        self.id = tb
        self.ops = []
        self.channels = {}     # ChannelType -> [gpu channel ids]
        self.remote_refs = {}  # ChannelType -> [gpu remote buffer ids]

    def channel(self, ctype, gpu_id):
        ids = self.channels.setdefault(ctype, [])
        if gpu_id not in ids:
            ids.append(gpu_id)
        return ids.index(gpu_id)

    def remote(self, ctype, gpu_id):
        ids = self.remote_refs.setdefault(ctype, [])
        if gpu_id not in ids:
            ids.append(gpu_id)
        return ids.index(gpu_id)


class Gpu:
    def __init__(self, rank, input_chunks, output_chunks):
        self.id = rank
        self.input_chunks = input_chunks
        self.output_chunks = output_chunks
        self.scratch_chunks = 0
        self.tbs = {}
        self.channels = {ChannelType.memory: [], ChannelType.port: []}  # peers, in order
        self.switches = []  # (buffer type, ranks)
        self.remote_buffers = []  # [rank, BufferType, [ChannelType...]]
        self.semaphores = []  # initial values

    def threadblock(self, tb):
        if tb not in self.tbs:
            for t in range(len(self.tbs), tb + 1):  # created up to the highest id used
                self.tbs.setdefault(t, Threadblock(t))
        return self.tbs[tb]

    def remote_buffer(self, rank, btype, ctype):
        for i, rb in enumerate(self.remote_buffers):
            if rb[0] == rank and rb[1] == btype:
                if ctype not in rb[2]:
                    rb[2].append(ctype)
                return i
        self.remote_buffers.append([rank, btype, [ctype]])
        return len(self.remote_buffers) - 1


# --- fusion (instr_fusion) ---

def _same_tbg(a, b):
    return a.tbg == b.tbg


def _sizes(op):
    return {c.size for _, c, _ in (op.src or []) + (op.dst or [])}


def _fuse(a, b):
    """a followed by b as one op, or None."""
    # (Syncs between two sync ops order no data: they merge, keeping the
    # first's sync before and the second's after.)
    if a.name == "nop" and b.name in ("nop", "barrier"):
        return b
    if a.name in ("signal", "wait", "rlxsignal", "rlxwait", "flush") and a.name == b.name:
        if a.channel_type == b.channel_type and not set(a.channel_ids) & set(b.channel_ids):
            f = a.clone()
            f.channel_ids = a.channel_ids + b.channel_ids
            f.sync = SyncType._of((a.sync._bits() & 1) | (b.sync._bits() & 2))
            return f
        return None
    if a.name in ("sem_acquire", "sem_release") and a.name == b.name:
        f = a.clone()
        f.semaphore_ids = a.semaphore_ids + [s for s in b.semaphore_ids
                                             if s not in a.semaphore_ids]
        f.sync = SyncType._of((a.sync._bits() & 1) | (b.sync._bits() & 2))
        return f
    if not _same_tbg(a, b) or a.name == "pipeline" or b.name == "pipeline":
        return None
    if SyncType.after._bits() & a.sync._bits() or SyncType.before._bits() & b.sync._bits():
        return None
    if a.name == b.name and a.name in ("put", "ppkt", "pws", "pwsf", "get", "rppkt"):
        if a.channel_type == b.channel_type and _sizes(a) == _sizes(b) and len(_sizes(a)) == 1:
            f = a.clone()
            f.src = a.src + b.src
            f.dst = a.dst + b.dst
            if a.channel_ids is not None:
                f.channel_ids = a.channel_ids + b.channel_ids
            return f
        return None
    if a.name in ("re", "rre") and b.name == a.name and a.src[0] == b.src[0] and a.dst == b.dst \
            and a.channel_type == b.channel_type:
        f = a.clone()
        f.src = a.src + b.src[1:]
        return f
    reduced = a.dst[0] if a.dst else None
    if a.name in ("re", "rre") and b.name == "put" and b.channel_type == ChannelType.memory \
            and len(b.src) == 1 and b.src[0] == reduced:
        f = a.clone()
        f.name = "res" if a.name == "re" else "rres"
        f.dst = a.dst + b.dst
        f.channel_type = ChannelType.memory
        return f
    if a.name in ("res", "rres") and b.name == "put" and b.channel_type == ChannelType.memory \
            and len(b.src) == 1 and b.src[0] == reduced:
        f = a.clone()
        f.dst = a.dst + b.dst
        return f
    if a.name in ("repkt", "respkt") and b.name == "ppkt" and \
            b.channel_type == ChannelType.memory and len(b.src) == 1 and b.src[0] == reduced:
        f = a.clone()
        f.name = "respkt"
        f.dst = a.dst + b.dst
        f.channel_type = ChannelType.memory
        return f
    if a.name == "repkt" and b.name == "cpkt" and b.src[0] == reduced:
        f = a.clone()
        f.name = "recpkt"
        f.dst = a.dst + b.dst
        return f
    if a.name in ("recpkt", "recspkt") and b.name in ("ppkt", "rppkt") and \
            b.channel_type == ChannelType.memory and len(b.src) == 1 and \
            (b.src[0] == a.dst[0] or b.src[0] == a.dst[-1]):
        f = a.clone()
        f.name = "recspkt"
        f.dst = a.dst + b.dst
        f.channel_type = ChannelType.memory
        return f
    if a.name == "glre" and b.name == "gstore" and a.src == b.dst and a.dst == b.src:
        f = a.clone()
        f.name = "glres"
        f.dst = b.dst
        return f
    return None


def fuse(ops):
    out = []
    for op in ops:
        if op.name == "pipeline":
            op.ops = fuse(op.ops)
        if out:
            f = _fuse(out[-1], op)
            if f is not None:
                out[-1] = f
                continue
        out.append(op)
    return out


def _nop(where):
    return Op("nop", where)


def add_data_syncs(ops):
    """Each sync-type op's data_sync as explicit nops (consecutive nops merged)."""
    out = []
    for op in ops:
        if op.name == "pipeline":
            op.ops = add_data_syncs(op.ops)
        bits = op.sync._bits() if op.name in Op.SYNC_OPS else 0
        if bits & 1 and not (out and out[-1].name in ("nop", "barrier")):
            out.append(_nop(op.where))
        out.append(op)
        if bits & 2:
            out.append(_nop(op.where))
    return out


def auto_sync(ops):
    """A nop before an op whose local accesses conflict with an earlier op's
    since the last nop or barrier (MSCCL++'s dependency pass)."""
    out, seen = [], []

    def conflicts(acc):
        for (b, lo, hi, w) in acc:
            for (b2, lo2, hi2, w2, _) in seen:
                if b == b2 and lo < hi2 and lo2 < hi and (w or w2):
                    return True
        return False

    for op in ops:
        if op.name in ("nop", "barrier"):
            seen = []
            out.append(op)
            continue
        if op.name == "pipeline":
            op.ops = auto_sync(op.ops)
            acc = [a for inner in op.ops for a in inner.local_accesses()]
        else:
            acc = op.local_accesses()
        if conflicts(acc):
            out.append(_nop(op.where))
            seen = []
        seen.extend(a + (op,) for a in acc)
        out.append(op)
    return out


def replicate(gpus, k):
    """``instances = k``: every threadblock, channel, semaphore and barrier k
    times, chunk i of instance j at i*k + j*size (interleaved)."""
    if k == 1:
        return
    for g in gpus:
        g.input_chunks *= k
        g.output_chunks *= k
        g.scratch_chunks *= k
        for t in g.channels:
            g.channels[t] = [p for p in g.channels[t] for _ in range(k)]
        g.switches = [s for s in g.switches for _ in range(k)]
        g.semaphores = [v for v in g.semaphores for _ in range(k)]
        tbs = {}
        for t, tb in g.tbs.items():
            for i in range(k):
                c = Threadblock(t * k + i)
                c.channels = {ct: [v * k + i for v in ids] for ct, ids in tb.channels.items()}
                c.remote_refs = {ct: list(ids) for ct, ids in tb.remote_refs.items()}
                c.ops = [_instance(op, k, i) for op in tb.ops]
                tbs[c.id] = c
        g.tbs = tbs


def _instance(op, k, i):
    o = op.clone()

    def chunk(e):
        kind, c, ident = e
        return (kind, type(c)(c.rank, c.buffer, c.index * k + i * c.size, c.size), ident)

    if o.src is not None:
        o.src = [chunk(e) for e in o.src]
    if o.dst is not None:
        o.dst = [chunk(e) for e in o.dst]
    if o.barrier_id is not None:
        o.barrier_id = o.barrier_id * k + i
    if o.semaphore_ids is not None:
        o.semaphore_ids = [s * k + i for s in o.semaphore_ids]
    if o.ops is not None:
        o.ops = [_instance(x, k, i) for x in o.ops]
    return o


def plan_dict(prog):
    """The plan as MSCCL++'s DSL writes it, and where each op came from:
    {(rank, tb, flattened op index) or its JSON path: (file, line)}."""
    where = {}
    gpus = []
    for g in prog.gpus:
        tbs = []
        for position, t in enumerate(sorted(g.tbs)):
            tb = g.tbs[t]
            flat = 0
            for k, op in enumerate(tb.ops):
                where[(g.id, tb.id, flat)] = op.where
                where[f"gpus[{g.id}].threadblocks[{position}].ops[{k}]"] = op.where
                flat += 1
                for m, inner in enumerate(op.ops or []):
                    where[(g.id, tb.id, flat)] = inner.where
                    where[f"gpus[{g.id}].threadblocks[{position}].ops[{k}].ops[{m}]"] = inner.where
                    flat += 1
            d = {"id": tb.id, "ops": [o.to_dict() for o in tb.ops],
                 "channels": [{"channel_type": str(ct), "channel_ids": ids}
                              for ct, ids in tb.channels.items()],
                 "remote_buffer_refs": [{"access_channel_type": str(ct),
                                         "remote_buffer_ids": ids}
                                        for ct, ids in tb.remote_refs.items()]}
            tbs.append(d)
        channels = [{"channel_type": str(t), "connected_to": peers}
                    for t, peers in g.channels.items() if peers]
        for btype, ranks in g.switches:
            channels.append({"channel_type": "switch", "buffer_type": str(btype),
                             "rank_groups": [{"size": len(ranks), "ranks": list(ranks)}]})
        gpus.append({"id": g.id, "input_chunks": g.input_chunks,
                     "output_chunks": g.output_chunks, "scratch_chunks": g.scratch_chunks,
                     "threadblocks": tbs, "channels": channels,
                     "remote_buffers": [{"rank": r, "type": str(b),
                                         "access_channel_types": [str(c) for c in cs]}
                                        for r, b, cs in g.remote_buffers],
                     "semaphores": [{"init_value": v} for v in g.semaphores]})
    plan = {"name": prog.name, "collective": prog.collective.name, "protocol": prog.protocol,
            "inplace": prog.collective.inplace, "reuse_resources": prog.reuse_resources,
            "gpus": gpus, "num_threads_per_block": prog.num_threads_per_block,
            "use_double_scratch_buffer": prog.use_double_scratch_buffer,
            "buffer_alignment": prog.buffer_alignment,
            "min_message_size": prog.min_message_size, "max_message_size": prog.max_message_size}
    return plan, where

