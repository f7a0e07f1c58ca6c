// Each operation becomes instructions in the program order of the ranks it
// touches: a copy between ranks a send on one and a receive on the other; a
// reduction between ranks a send and a receive-reduce-copy whose local
// operand is the chunk being reduced into (docs/spec/IR.md section 2: never the
// remote one); on one rank a copy, or a reduce (with a copy first when the
// result goes elsewhere than the local operand).
#include "compiler/passes.h"

namespace chorus::compiler {

namespace {

Instr make(ir::StepType t, const lang::Operation& op) {
  Instr x;
  x.type = t;
  x.count = op.size;
  x.channel = op.hints.channel >= 0 ? op.hints.channel : 0;
  x.hints = op.hints;
  x.file = op.file;
  x.line = op.line;
  x.column = op.column;
  return x;
}

void setSrc(Instr& x, const lang::Operation::Place& p) {
  x.srcBuf = p.buffer;
  x.srcIdx = p.index;
}
void setDst(Instr& x, const lang::Operation::Place& p) {
  x.dstBuf = p.buffer;
  x.dstIdx = p.index;
}

}  // namespace

void lower(Mir& m) {
  using ir::StepType;
  m.ranks.assign(static_cast<size_t>(m.options.ranks), {});
  // Sized first (whole programs): every instruction is written once, never moved.
  // A per-rank compile (Mir::options.focus) lowers its rank's side only.
  const int focus = m.options.focus;
  auto mine = [focus](int rank) { return focus < 0 || rank == focus; };
  std::vector<size_t> per(m.ranks.size(), 0), sends(m.ranks.size(), 0);
  for (size_t k = 0; k < m.opCount(); ++k) {
    const lang::Operation& op = m.op(k);
    ++per[static_cast<size_t>(op.dst.rank)];
    if (op.src.rank != op.dst.rank)
      ++sends[static_cast<size_t>(op.src.rank)];
    else if (op.kind == lang::Operation::Kind::kReduce)
      ++per[static_cast<size_t>(op.dst.rank)];  // at most a copy and a reduce
  }
  // Fusion (mir.h) runs as instructions are appended, unless the lowered
  // form is to be printed unfused (--print-after=lower): the sends that
  // forward a receive (most, in rings and trees) are then never stored. So
  // each rank reserves for the rest and a sixteenth of its sends, not for
  // all: the operations are alive beside them, and at scale this is the
  // compile's largest moment.
  // One Fusion per rank lowered (a per-rank compile: its rank's alone).
  std::vector<Fusion> fusion(!m.fuseWhileLowering ? 0 : focus >= 0 ? 1 : m.ranks.size());
  for (size_t r = 0; r < per.size(); ++r)
    if (mine(static_cast<int>(r)))
      m.ranks[r].reserve(per[r] + (m.fuseWhileLowering ? sends[r] / 16 + 1 : sends[r]));
  auto append = [&](int rank, Instr x) {
    std::vector<Instr>& xs = m.ranks[static_cast<size_t>(rank)];
    xs.push_back(std::move(x));
    if (m.fuseWhileLowering && fusion[focus >= 0 ? 0 : static_cast<size_t>(rank)].forwards(
                                   xs, static_cast<int>(xs.size()) - 1))
      xs.pop_back();
  };
  // Operations of one depth (schedule.cc) become, on each rank, its sends,
  // then its local work, then its receives: three passes over the group.
  enum Part { kSends, kLocal, kReceives };
  auto lowerPart = [&](const lang::Operation& op, Part part) {
    bool reduce = op.kind == lang::Operation::Kind::kReduce;
    if (op.src.rank != op.dst.rank) {
      if (part == kSends && mine(op.src.rank)) {
        Instr s = make(StepType::kSend, op);
        setSrc(s, op.src);
        s.sendPeer = op.dst.rank;
        s.hints.recvTb = -1;
        append(op.src.rank, std::move(s));
      } else if (part == kReceives && mine(op.dst.rank)) {
        Instr r = make(reduce ? StepType::kRecvReduceCopy : StepType::kRecv, op);
        if (reduce) setSrc(r, op.local);
        setDst(r, op.dst);
        r.recvPeer = op.src.rank;
        r.hints.sendTb = -1;
        append(op.dst.rank, std::move(r));
      }
      return;
    }
    if (part != kLocal || !mine(op.dst.rank)) return;
    if (!reduce) {
      Instr c = make(StepType::kCopy, op);
      setSrc(c, op.src);
      setDst(c, op.dst);
      append(op.dst.rank, std::move(c));
      return;
    }
    bool intoLocal = op.local.buffer == op.dst.buffer && op.local.index == op.dst.index;
    if (!intoLocal) {
      Instr c = make(StepType::kCopy, op);
      setSrc(c, op.local);
      setDst(c, op.dst);
      append(op.dst.rank, std::move(c));
    }
    Instr re = make(StepType::kReduce, op);
    setSrc(re, op.src);
    setDst(re, op.dst);
    append(op.dst.rank, std::move(re));
  };
  const size_t count = m.opCount();
  const bool scheduled = m.depth.size() == count;
  auto depthOf = [&](size_t i) { return scheduled ? m.depth[i] : 0; };
  for (size_t begin = 0, end = 0; begin < count; begin = end) {
    for (end = begin; end < count && depthOf(end) == depthOf(begin);) ++end;
    for (Part part : {kSends, kLocal, kReceives})
      for (size_t i = begin; i < end; ++i) lowerPart(m.op(i), part);
  }
  // The instructions are what the passes after this read: the operations go.
  if (count > 0) m.opsFile = m.op(0).file;
  std::vector<lang::Operation>().swap(m.ops);
  std::vector<uint32_t>().swap(m.order);
  std::vector<int>().swap(m.depth);
}

}  // namespace chorus::compiler
