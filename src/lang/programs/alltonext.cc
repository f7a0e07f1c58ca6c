// AllToNext (MSCCLang's paper): every rank sends its whole buffer to the
// next rank (forward) or the previous one (backward), the pattern of
// pipeline-parallel training. It is a custom collective: the program states
// its meaning (rank r + 1's output is rank r's input) and the verifier
// proves the compiled algorithm against it.
//
// Inside a node the buffer goes directly. Where the next rank is on another
// node one link pair would carry everything, so the buffer (G chunks for
// G GPUs per node) is spread over the node: chunk k moves to the node's GPU
// k, crosses to GPU k of the next node, and is gathered at the receiver. All
// G links between the two nodes carry a share.
#include "lang/programs/programs.h"

namespace chorus::lang {

namespace {

void allToNext(Program& p, int dir) {
  const int n = p.options().ranks;
  const int g = gpusPerNode(p);
  if (g == 0) return;
  // Rank `end` has nobody to send to; nobody sends to `start`.
  const int start = dir > 0 ? 0 : n - 1, end = dir > 0 ? n - 1 : 0;
  std::vector<Source> present;
  for (int r = 0; r < n; ++r)
    if (r != end)
      for (int k = 0; k < g; ++k) present.push_back({r, k});
  p.precondition(present);
  for (int r = 0; r < n; ++r)
    if (r != start)
      for (int k = 0; k < g; ++k) p.postcondition(r, k, {{r - dir, k}});

  Buffer outbound = p.scratch("outbound"), inbound = p.scratch("inbound");
  // From the end backwards: in place (one buffer per rank) each rank sends
  // its buffer before the previous rank's arrives in it.
  for (int i = 1; i < n; ++i) {
    const int r = end - dir * i;
    const int to = r + dir, node = r / g, toNode = to / g;
    if (node == toNode) {
      p.chunk(r, kInput, 0, g).copy(to, kOutput, 0);
      continue;
    }
    for (int k = 0; k < g; ++k) {
      Chunk c = p.chunk(r, kInput, k);
      if (node * g + k != r) c = c.copy(node * g + k, outbound, 0);
      if (toNode * g + k != to) c = c.copy(toNode * g + k, inbound, 0);
      c.copy(to, kOutput, k);
    }
  }
}

void allToNextForward(Program& p) { allToNext(p, +1); }
void allToNextBackward(Program& p) { allToNext(p, -1); }

}  // namespace

void addAllToNextPrograms(std::vector<ProgramEntry>& out) {
  auto chunks = [](const ProgramOptions& o) { return o.gpusPerNode > 0 ? o.gpusPerNode : o.ranks; };
  out.push_back({"alltonext_forward",
                 "rank r's buffer to rank r + 1; across nodes spread over all G GPUs' links "
                 "(custom collective, --gpus-per-node G)",
                 "alltonext",
                 "2+ (G divides it)",
                 [](int n) { return n >= 2; },
                 chunks,
                 allToNextForward,
                 {"gpus-per-node"}});
  out.push_back({"alltonext_backward",
                 "rank r's buffer to rank r - 1; across nodes spread over all G GPUs' links "
                 "(custom collective, --gpus-per-node G)",
                 "alltonext",
                 "2+ (G divides it)",
                 [](int n) { return n >= 2; },
                 chunks,
                 allToNextBackward,
                 {"gpus-per-node"}});
}

}  // namespace chorus::lang
