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
#include <algorithm>

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

// Its per-rank form (docs/scale.md). The whole program takes the senders
// from the end backwards; the focus appears in at most four of them: its
// own, its predecessor's (into its buffer), and as a relay (GPU k of a
// node) the cross-node chains out of and into its node. Depths, out of
// place: the inside-node copy is at 1, a chain's hops at 1, 2, 3 (fewer
// when a hop is skipped). In place a rank's buffer may only be written once
// it has been sent: a sender's first reads are at R(r), its distance in
// same-node hops from where its node's chain starts (its node's end rank:
// 0; another node's cross-node sender: 1), and an arrival comes one depth
// after its destination's R.
void allToNextRank(Program& p, int dir) {
  const int n = p.options().ranks, f = p.focus();
  const int g = gpusPerNode(p);
  if (g == 0) return;
  const bool inplace = p.options().inplace;
  const int end = dir > 0 ? n - 1 : 0, endNode = end / g;
  Buffer outbound = p.scratch("outbound", g >= 2 && n / g >= 2 ? 1 : 0);
  Buffer inbound = p.scratch("inbound", g >= 2 && n / g >= 2 ? 1 : 0);
  // The depth of a sender's first reads, in place.
  auto reads = [&](int r) {
    if (g == 1) return dir * (end - r);
    const int toBoundary = dir > 0 ? g - 1 - r % g : r % g;
    return toBoundary + (r / g == endNode ? 0 : 1);
  };
  auto send = [&](int r) {  // every operation of sender r (those not touching f are dropped)
    const int to = r + dir, node = r / g, toNode = to / g;
    if (node == toNode) {
      p.depth(inplace ? reads(r) : 1);
      p.chunk(r, kInput, 0, g).copy(to, kOutput, 0);
      return;
    }
    for (int k = 0; k < g; ++k) {
      int depth = 0;
      Chunk c = p.chunk(r, kInput, k);
      if (node * g + k != r) {
        p.depth(++depth);
        c = c.copy(node * g + k, outbound, 0);
      }
      if (toNode * g + k != to) {
        p.depth(++depth);
        c = c.copy(toNode * g + k, inbound, 0);
      }
      p.depth(1 + std::max(depth, inplace ? reads(to) : 0));
      c.copy(to, kOutput, k);
    }
  };
  // The senders whose operations touch f, in the whole program's order
  // (distance from the end): f itself, its predecessor, and the cross-node
  // senders out of and into f's node.
  std::vector<int> senders;
  auto add = [&](int r) {
    if (r < 0 || r >= n || r == end) return;
    senders.push_back(r);
  };
  const int node = f / g;
  add(f);
  add(f - dir);
  add(dir > 0 ? node * g + g - 1 : node * g);    // out of f's node
  add(dir > 0 ? node * g - 1 : (node + 1) * g);  // into f's node
  std::sort(senders.begin(), senders.end(),
            [&](int a, int b) { return dir * (end - a) < dir * (end - b); });
  senders.erase(std::unique(senders.begin(), senders.end()), senders.end());
  for (int r : senders) send(r);
}

void allToNextForward(Program& p) { allToNext(p, +1); }
void allToNextBackward(Program& p) { allToNext(p, -1); }
void allToNextForwardRank(Program& p) { allToNextRank(p, +1); }
void allToNextBackwardRank(Program& p) { allToNextRank(p, -1); }

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
                 {"gpus-per-node"},
                 allToNextForwardRank});
  out.push_back({"alltonext_backward",
                 "rank r's buffer to rank r - 1; across nodes spread over all G GPUs' links "
                 "(custom collective, --gpus-per-node G)",
                 "alltonext",
                 "2+ (G divides it)",
                 [](int n) { return n >= 2; },
                 chunks,
                 allToNextBackward,
                 {"gpus-per-node"},
                 allToNextBackwardRank});
}

}  // namespace chorus::lang
