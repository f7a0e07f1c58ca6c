// Each operation becomes instructions in the program order of the ranks it
// touches: a copy between ranks a send on one and a receive on the other; a
// reduction between ranks a send and a receive-reduce-copy whose local
// operand is the chunk being reduced into (IR.md section 2: never the
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
  // Sized first: every instruction is written once, never moved.
  std::vector<size_t> per(m.ranks.size(), 0);
  for (const lang::Operation& op : m.ops) {
    ++per[static_cast<size_t>(op.dst.rank)];
    if (op.src.rank != op.dst.rank)
      ++per[static_cast<size_t>(op.src.rank)];
    else if (op.kind == lang::Operation::Kind::kReduce)
      ++per[static_cast<size_t>(op.dst.rank)];  // at most a copy and a reduce
  }
  for (size_t r = 0; r < per.size(); ++r) m.ranks[r].reserve(per[r]);
  // Operations of one depth (schedule.cc) become, on each rank, its sends,
  // then its local work, then its receives: three passes over the group.
  enum Part { kSends, kLocal, kReceives };
  auto lowerPart = [&](const lang::Operation& op, Part part) {
    auto& from = m.ranks[static_cast<size_t>(op.src.rank)];
    auto& to = m.ranks[static_cast<size_t>(op.dst.rank)];
    bool reduce = op.kind == lang::Operation::Kind::kReduce;
    if (op.src.rank != op.dst.rank) {
      if (part == kSends) {
        Instr s = make(StepType::kSend, op);
        setSrc(s, op.src);
        s.sendPeer = op.dst.rank;
        s.hints.recvTb = -1;
        from.push_back(std::move(s));
      } else if (part == kReceives) {
        Instr r = make(reduce ? StepType::kRecvReduceCopy : StepType::kRecv, op);
        if (reduce) setSrc(r, op.local);
        setDst(r, op.dst);
        r.recvPeer = op.src.rank;
        r.hints.sendTb = -1;
        to.push_back(std::move(r));
      }
      return;
    }
    if (part != kLocal) return;
    if (!reduce) {
      Instr c = make(StepType::kCopy, op);
      setSrc(c, op.src);
      setDst(c, op.dst);
      to.push_back(std::move(c));
      return;
    }
    bool intoLocal = op.local.buffer == op.dst.buffer && op.local.index == op.dst.index;
    if (!intoLocal) {
      Instr c = make(StepType::kCopy, op);
      setSrc(c, op.local);
      setDst(c, op.dst);
      to.push_back(std::move(c));
    }
    Instr re = make(StepType::kReduce, op);
    setSrc(re, op.src);
    setDst(re, op.dst);
    to.push_back(std::move(re));
  };
  const bool scheduled = m.depth.size() == m.ops.size();
  auto depthOf = [&](size_t i) { return scheduled ? m.depth[i] : 0; };
  for (size_t begin = 0, end = 0; begin < m.ops.size(); begin = end) {
    for (end = begin; end < m.ops.size() && depthOf(end) == depthOf(begin);) ++end;
    for (Part part : {kSends, kLocal, kReceives})
      for (size_t i = begin; i < end; ++i) lowerPart(m.ops[i], part);
  }
}

}  // namespace chorus::compiler
