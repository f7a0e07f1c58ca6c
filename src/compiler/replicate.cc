// Instances: the program runs `instances` times side by side, each copy on
// chunks and channels of its own, so that together they still implement the
// collective:
//   interleaved (default): chunk x of every buffer of instance i becomes
//     chunk x * instances + i;
//   blocked: inside each rank's share of c chunks (c = the chunk factor),
//     instance i takes the i-th run of c: chunk b * c + k becomes
//     b * c * instances + i * c + k; scratch buffers hold one instance after
//     another. Multi-chunk operations stay multi-chunk.
// Channel h of instance i becomes channel h * instances + i (operations
// without a channel are on channel 0), so every instance has connections of
// its own. A custom collective's postconditions are replicated the same way.
#include <algorithm>

#include "compiler/passes.h"

namespace chorus::compiler {

void replicate(const lang::Program& program, Mir& m) {
  const lang::ProgramOptions& o = program.options();
  const int copies = o.instances, c = o.chunkFactor;
  m.options = o;
  m.file = program.file();
  m.inputChunks = program.inputChunks() * copies;
  m.outputChunks = program.outputChunks() * copies;
  m.scratchNames = program.scratchNames();
  m.scratchExtents = program.scratchExtents();
  for (int& e : m.scratchExtents) e *= copies;  // either layout: `copies` times one instance's
  m.ops.clear();
  m.post.clear();
  // In the scheduled order (schedule.cc), every instance of an operation
  // next to the others; depths follow the operations.
  const std::vector<lang::Operation>& source = program.operations();
  const bool scheduled = m.order.size() == source.size();
  auto sourceAt = [&](size_t k) -> const lang::Operation& {
    return source[scheduled ? m.order[k] : k];
  };
  std::vector<int> depthOf = std::move(m.depth);
  m.depth.clear();
  auto depthAt = [&](size_t k) { return scheduled ? depthOf[k] : 0; };
  if (copies == 1) {  // nothing to replicate: lowering reads the program's, in `order`
    m.depth = std::move(depthOf);
    if (!scheduled) {
      m.order.resize(source.size());
      for (size_t k = 0; k < source.size(); ++k) m.order[k] = static_cast<uint32_t>(k);
    }
    m.post = program.postconditions();
    return;
  }
  // Blocked scratch: the chunks one instance uses, per scratch buffer.
  std::vector<int> extent = program.scratchExtents();
  for (const lang::Operation& op : program.operations())
    for (const lang::Operation::Place& p : {op.src, op.dst, op.local})
      if (p.buffer >= 2) {
        int& e = extent[static_cast<size_t>(p.buffer - 2)];
        e = std::max(e, p.index + op.size);
      }
  auto index = [&](lang::Buffer b, int x, int i) {
    if (!o.blockedInstances) return x * copies + i;
    if (b >= 2) return i * extent[static_cast<size_t>(b - 2)] + x;
    return x / c * c * copies + i * c + x % c;
  };
  for (int i = 0; i < copies; ++i)
    for (lang::Expected e : program.postconditions()) {
      e.index = index(lang::kOutput, e.index, i);
      for (lang::Source& s : e.holds) s.index = index(lang::kInput, s.index, i);
      m.post.push_back(std::move(e));
    }
  auto at = [&](lang::Operation::Place p, int k, int i) {
    p.index = index(p.buffer, p.index + k, i);
    return p;
  };
  auto follows = [](const lang::Operation::Place& a, const lang::Operation::Place& b, int n) {
    return b.index == a.index + n;
  };
  size_t chunks = 0;
  for (const lang::Operation& op : source) chunks += static_cast<size_t>(op.size);
  m.ops.reserve(chunks * static_cast<size_t>(copies));
  m.depth.reserve(chunks * static_cast<size_t>(copies));
  for (size_t begin = 0, end = 0; begin < source.size(); begin = end) {
    for (end = begin; end < source.size() && depthAt(end) == depthAt(begin);) ++end;
    for (int i = 0; i < copies; ++i)
      for (size_t s = begin; s < end; ++s) {
        const lang::Operation& op = sourceAt(s);
        for (int k = 0; k < op.size; ++k) {
          lang::Operation x = op;
          x.src = at(op.src, k, i);
          x.dst = at(op.dst, k, i);
          x.local = at(op.local, k, i);
          x.size = 1;
          x.hints.channel = std::max(0, op.hints.channel) * copies + i;
          // The chunks of one operation that stay adjacent stay one operation.
          if (k > 0) {
            lang::Operation& last = m.ops.back();
            if (follows(last.src, x.src, last.size) && follows(last.dst, x.dst, last.size) &&
                follows(last.local, x.local, last.size)) {
              ++last.size;
              continue;
            }
          }
          m.ops.push_back(x);
          m.depth.push_back(depthAt(begin));
        }
      }
  }
  m.order.clear();
}

}  // namespace chorus::compiler
