// Instances: the program runs `instances` times side by side. Chunk k of
// every buffer of instance i becomes chunk k * instances + i (interleaved:
// the collective's chunk order is kept, so the copies together still
// implement it), and channel c of instance i becomes channel
// c * instances + i (operations without a channel are on channel 0), so
// every instance has connections of its own. A multi-chunk operation of several instances becomes
// one operation per chunk (its chunks are no longer adjacent). A custom
// collective's postconditions are replicated the same way.
#include <algorithm>

#include "compiler/passes.h"

namespace chorus::compiler {

void replicate(const lang::Program& program, Mir& m) {
  const int copies = program.options().instances;
  m.options = program.options();
  m.file = program.file();
  m.inputChunks = program.inputChunks() * copies;
  m.outputChunks = program.outputChunks() * copies;
  m.scratchNames = program.scratchNames();
  m.ops.clear();
  m.post.clear();
  if (copies == 1) {
    m.ops = program.operations();
    m.post = program.postconditions();
    return;
  }
  for (int i = 0; i < copies; ++i)
    for (lang::Expected e : program.postconditions()) {
      e.index = e.index * copies + i;
      for (lang::Source& s : e.holds) s.index = s.index * copies + i;
      m.post.push_back(std::move(e));
    }
  auto at = [copies](lang::Operation::Place p, int k, int i) {
    p.index = (p.index + k) * copies + i;
    return p;
  };
  for (int i = 0; i < copies; ++i)
    for (const lang::Operation& op : program.operations())
      for (int k = 0; k < op.size; ++k) {
        lang::Operation o = op;
        o.src = at(op.src, k, i);
        o.dst = at(op.dst, k, i);
        o.local = at(op.local, k, i);
        o.size = 1;
        o.hints.channel = std::max(0, op.hints.channel) * copies + i;
        m.ops.push_back(o);
      }
}

}  // namespace chorus::compiler
