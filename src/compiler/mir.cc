#include "compiler/mir.h"

namespace chorus::compiler {

namespace {
std::string place(int b, int k, int count) {
  if (b < 0 || k < 0) return "-";
  // Appends only: GCC 12 -O3 warns (-Wrestrict) on a ternary concatenation.
  std::string name;
  if (b == 0) {
    name = "i";
  } else if (b == 1) {
    name = "o";
  } else {
    name = "s";
    name.append(std::to_string(b - 2));
  }
  name.append("[").append(std::to_string(k));
  if (count > 1) name.append("..").append(std::to_string(k + count - 1));
  return name.append("]");
}
}  // namespace

std::string print(const Mir& m) {
  std::string out;
  if (m.ranks.empty()) {  // before lowering: the operations, in order
    // After scheduling: the program's, by `order`; after replication: `ops`.
    const bool scheduled = m.source != nullptr && m.order.size() == m.source->size();
    const std::vector<lang::Operation>& ops = scheduled ? *m.source : m.ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const lang::Operation& op = ops[scheduled ? m.order[i] : i];
      bool reduce = op.kind == lang::Operation::Kind::kReduce;
      out.append(reduce ? "reduce " : "copy ")
          .append("r" + std::to_string(op.src.rank) + " ")
          .append(place(op.src.buffer, op.src.index, op.size))
          .append(" -> r" + std::to_string(op.dst.rank) + " ")
          .append(place(op.dst.buffer, op.dst.index, op.size));
      if (reduce) out.append(" with ").append(place(op.local.buffer, op.local.index, op.size));
      if (i < m.depth.size()) out.append(" depth " + std::to_string(m.depth[i]));
      out.append(" @" + std::to_string(op.line) + "\n");
    }
    return out;
  }
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    out += "rank " + std::to_string(r) + "\n";
    for (const Instr& x : m.ranks[r]) {
      if (x.dead) continue;
      out += "  ";
      if (x.tb >= 0) out += "tb " + std::to_string(x.tb) + " ";
      if (x.step >= 0) out += "step " + std::to_string(x.step) + " ";
      bool src = ir::readsSrc(x.type) || x.type == ir::StepType::kSend;
      out += std::string(ir::stepTypeName(x.type)) + " " +
             (src ? place(x.srcBuf, x.srcIdx, x.count) : "-") + " -> " +
             (ir::writesDst(x.type) ? place(x.dstBuf, x.dstIdx, x.count) : "-");
      if (x.recvPeer >= 0) out += " from " + std::to_string(x.recvPeer);
      if (x.sendPeer >= 0) out += " to " + std::to_string(x.sendPeer);
      out += " chan " + std::to_string(x.channel);
      for (const auto& [tb, step] : x.deps)
        out += " after (" + std::to_string(tb) + "," + std::to_string(step) + ")";
      out += " @" + std::to_string(x.line) + "\n";
    }
  }
  return out;
}

Diagnostic& report(DiagnosticList& d, DiagCode code, const Mir& m, const Instr& at, int rank,
                   std::string message) {
  Location loc;
  loc.file = at.file != nullptr && *at.file != '\0' ? at.file : m.file;
  loc.line = at.line;
  loc.column = at.column;
  loc.rank = rank;
  return d.add(code, loc, std::move(message));
}

}  // namespace chorus::compiler
