// Scheduling: the program's operations in the order of their depth — an operation's
// depth is one more than the deepest operation it must follow on a rank it
// touches (the writer of what it reads, the readers and writer of what it
// overwrites) — and in program order within a depth. A program written one
// chunk's journey after another (the natural way) would otherwise make each
// rank serve the chunks in that order: chunk 1's first hop would wait until
// the rank had forwarded chunk 0 all the way. By depth, every rank does the
// first hop of every chunk, then the second, ...: the classic schedules
// (ring: one chunk per rank per round) come out of journey-by-journey code.
//
// Lowering then orders each rank's instructions by depth and, within a
// depth, sends first, then local work, then receives (a rank starts its next
// chunk before it takes in the one its neighbour sends: a ring's rank
// forwards what it received in the previous round, as the classic schedule
// does, and receive + send fuse).
//
// The order stays valid: every dependency has a smaller depth; the
// operations of one depth do not depend on each other, and a rank's sends of
// a depth come before its receives of it, so they all complete, depth by
// depth. The send and the receive of an operation keep its place among the
// operations of its connection, so both ends see its messages in one order.
#include <algorithm>

#include "compiler/passes.h"

namespace chorus::compiler {

void schedule(const lang::Program& program, Mir& m) {
  const std::vector<lang::Operation>& ops = program.operations();
  m.options = program.options();
  struct Hazard {
    int written = 0;  // depth of the last writer
    int read = 0;     // deepest reader since then
  };
  std::vector<PerChunk<Hazard>> at(m.options.focus >= 0 ? 0 : static_cast<size_t>(m.options.ranks),
                                   PerChunk<Hazard>({}));
  std::vector<int> depth(ops.size());
  // A per-rank form states the depths (it does not see the operations that
  // chain them); the counting sort below is the same.
  for (size_t i = 0; i < ops.size() && m.options.focus >= 0; ++i) depth[i] = ops[i].depth;
  for (size_t i = 0; i < ops.size() && m.options.focus < 0; ++i) {
    const lang::Operation& op = ops[i];
    int d = 0;
    for (int k = 0; k < op.size; ++k) {
      auto& src = at[static_cast<size_t>(op.src.rank)].at(op.src.buffer, op.src.index + k);
      auto& dst = at[static_cast<size_t>(op.dst.rank)].at(op.dst.buffer, op.dst.index + k);
      auto& local = at[static_cast<size_t>(op.local.rank)].at(op.local.buffer, op.local.index + k);
      d = std::max({d, src.written, local.written, dst.written, dst.read});
    }
    d = std::max(d + 1, op.hints.round);  // Hints::round: no earlier than that round
    depth[i] = d;
    for (int k = 0; k < op.size; ++k) {
      auto& src = at[static_cast<size_t>(op.src.rank)].at(op.src.buffer, op.src.index + k);
      auto& local = at[static_cast<size_t>(op.local.rank)].at(op.local.buffer, op.local.index + k);
      src.read = std::max(src.read, d);
      local.read = std::max(local.read, d);
      auto& dst = at[static_cast<size_t>(op.dst.rank)].at(op.dst.buffer, op.dst.index + k);
      dst = Hazard{d, 0};
    }
  }
  // A counting sort by depth keeps program order within a depth.
  int deepest = 0;
  for (int d : depth) deepest = std::max(deepest, d);
  std::vector<size_t> start(static_cast<size_t>(deepest) + 2, 0);
  for (int d : depth) ++start[static_cast<size_t>(d) + 1];
  for (size_t d = 1; d < start.size(); ++d) start[d] += start[d - 1];
  // Indices: replication then writes the operations in this order (the
  // instances of an operation share its depth: they touch other chunks).
  m.order.assign(ops.size(), 0);
  m.depth.assign(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    size_t slot = start[static_cast<size_t>(depth[i])]++;
    m.order[slot] = static_cast<uint32_t>(i);
    m.depth[slot] = depth[i];
  }
}

}  // namespace chorus::compiler
