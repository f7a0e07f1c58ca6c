// Hierarchical allreduce for N nodes of G GPUs (rank = node * G + gpu):
//   1. inside each node, a ring reduce-scatter: GPU g ends with its node's
//      sum of block g (N chunks);
//   2. across nodes, GPU g of every node runs a ring allreduce of block g
//      (one chunk per node), on channel 1;
//   3. inside each node, a ring allgather of the blocks.
// Intra-node traffic moves G times more data than inter-node traffic, the
// shape that suits fast links inside a node and slower ones between.
#include "lang/programs/programs.h"

namespace chorus::lang {

int gpusPerNode(Program& p, Where where) {
  const int n = p.options().ranks;
  const int g = p.options().gpusPerNode > 0 ? p.options().gpusPerNode : n;
  return p.require(n % g == 0,
                   "--gpus-per-node " + std::to_string(g) + " does not divide " +
                       std::to_string(n) + " ranks",
                   where)
             ? g
             : 0;
}

namespace {

void hierarchicalAllReduce(Program& p) {
  const int n = p.options().ranks;
  const int g = gpusPerNode(p);
  if (g == 0) return;
  const int nodes = n / g;
  auto rank = [g](int node, int gpu) { return node * g + gpu; };
  const Hints across{.channel = 1};
  if (n == 1) {
    if (!p.options().inplace) p.chunk(0, kInput, 0).copy(0, kOutput, 0);
    return;
  }
  for (int node = 0; node < nodes; ++node)
    for (int b = 0; b < g; ++b) {
      // 1. Block b summed around the node's ring, ending at GPU b.
      int start = (b + 1) % g;
      Chunk c = p.chunk(rank(node, start), kInput, b * nodes, nodes);
      for (int step = 1; step < g; ++step) {
        int gpu = (start + step) % g;
        c = p.chunk(rank(node, gpu), kInput, b * nodes, nodes).reduce(c, kOutput, b * nodes);
      }
      if (g == 1 && !p.options().inplace) c.copy(rank(node, 0), kOutput, 0);
    }
  for (int b = 0; b < g; ++b)
    for (int k = 0; k < nodes; ++k) {
      // 2. Chunk b*nodes + k of block b: around the nodes, ending at node k,
      //    then around once more.
      int index = b * nodes + k;
      int start = (k + 1) % nodes;
      Chunk c = p.chunk(rank(start, b), kOutput, index);
      for (int step = 1; step < nodes; ++step)
        c = p.chunk(rank((start + step) % nodes, b), kOutput, index).reduce(c, across);
      for (int step = 1; step < nodes; ++step)
        c = c.copy(rank((k + step) % nodes, b), kOutput, index, across);
    }
  for (int node = 0; node < nodes; ++node)
    for (int b = 0; b < g; ++b) {
      // 3. Block b from GPU b around the node.
      Chunk c = p.chunk(rank(node, b), kOutput, b * nodes, nodes);
      for (int step = 1; step < g; ++step)
        c = c.copy(rank(node, (b + step) % g), kOutput, b * nodes);
    }
}

// Its per-rank form (docs/scale.md): the focus is GPU `gpu` of node `node`.
// Depths: phase 1's hop s is at s; phase 2 starts once the node sums are
// there (d1: g - 1, or the g == 1 copy), its reduction's hop s at d1 + s
// and its copy's hop t at d1 + nodes - 1 + t; phase 3's hop t at d2 + t,
// d2 being when the last of a GPU's block arrived in phase 2.
void hierarchicalAllReduceRank(Program& p) {
  const int n = p.options().ranks;
  const int g = gpusPerNode(p);
  if (g == 0) return;
  const int nodes = n / g, node = p.focus() / g, gpu = p.focus() % g;
  const bool inplace = p.options().inplace;
  const Hints across{.channel = 1};
  if (n == 1) return aloneRank(p);
  const RingOf inNode{g, [&](int i) { return node * g + i; }, gpu};
  for (int b = 0; b < g; ++b) {
    reduceAroundRank(
        p, inNode, kInput, b * nodes, nodes, (b + 1) % g, {},
        [&](int) {
          return std::pair{kOutput, b * nodes};
        },
        0);
    if (g == 1 && !inplace) {
      p.depth(1);
      p.chunk(p.focus(), kInput, 0, nodes).copy(p.focus(), kOutput, 0);
    }
  }
  const int d1 = g > 1 ? g - 1 : inplace ? 0 : 1;
  const RingOf acrossNodes{nodes, [&](int i) { return i * g + gpu; }, node};
  for (int k = 0; k < nodes; ++k) {
    const int index = gpu * nodes + k;
    reduceAroundRank(
        p, acrossNodes, kOutput, index, 1, (k + 1) % nodes, across,
        [&](int) {
          return std::pair{kOutput, index};
        },
        d1);
    copyAroundRank(p, acrossNodes, {k, kOutput, index}, index, 1, across, d1 + nodes - 1);
  }
  const int d2 = nodes > 1 ? d1 + 2 * (nodes - 1) : d1;
  for (int b = 0; b < g; ++b)
    copyAroundRank(p, inNode, {b, kOutput, b * nodes}, b * nodes, nodes, {}, d2);
}

// Two-step alltoall for N nodes of G GPUs: a block for GPU h of another node
// first moves inside its node to the local GPU h (into scratch, grouped by
// destination node), then each GPU sends one message of G blocks per other
// node, to the GPU with its own index there. Blocks for the own node go
// directly. Cross-node messages: N - 1 per GPU instead of (N - 1) * G.
// Block d of rank s: straight to d inside the node, else to the GPU of
// s's node with d's index, grouped by destination node.
void twoStepFirstMove(Program& p, int g, Buffer landing, Buffer gathered, int s, int d) {
  const int node = s / g, gpu = s % g, toNode = d / g, toGpu = d % g;
  if (p.options().inplace && s == d) return;
  Chunk c = p.chunk(s, kInput, d);
  if (node == toNode)
    c.copy(d, landing, s);
  else
    c.copy(node * g + toGpu, gathered, toNode * g + gpu);
}

void twoStepAllToAll(Program& p) {
  const int n = p.options().ranks;
  const int g = gpusPerNode(p);
  if (g == 0) return;
  const int nodes = n / g;
  const bool inplace = p.options().inplace;
  Buffer gathered = p.scratch("gathered");
  // In place a block may only land once its slot has been sent: it lands in
  // scratch first and moves in at the end.
  Buffer landing = inplace ? p.scratch("arrived") : kOutput;
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) twoStepFirstMove(p, g, landing, gathered, s, d);
  for (int r = 0; r < n; ++r)
    for (int toNode = 0; toNode < nodes; ++toNode) {
      int node = r / g, gpu = r % g;
      if (toNode == node) continue;
      p.chunk(r, gathered, toNode * g, g).copy(toNode * g + gpu, landing, node * g);
    }
  if (inplace)
    for (int d = 0; d < n; ++d)
      for (int s = 0; s < n; ++s)
        if (s != d) p.chunk(d, landing, s).copy(d, kInput, s);
}

// Its per-rank form (docs/scale.md): the first moves (into scratch, or
// straight inside the node) are at depth 1, the node-to-node messages at
// 2; in place, blocks move out of scratch once their slot has been sent
// (2 from the own node, 3 from others).
void twoStepAllToAllRank(Program& p) {
  const int n = p.options().ranks;
  const int g = gpusPerNode(p);
  if (g == 0) return;
  const int nodes = n / g, f = p.focus(), node = f / g, gpu = f % g;
  const bool inplace = p.options().inplace;
  Buffer gathered = p.scratch("gathered", nodes >= 2 ? n : 0);
  Buffer landing = inplace ? p.scratch("arrived", n >= 2 ? n : 0) : kOutput;
  auto first = [&](int s, int d) { twoStepFirstMove(p, g, landing, gathered, s, d); };
  p.depth(1);
  for (int s = node * g; s < (node + 1) * g; ++s) {
    if (s == f) {
      for (int d = 0; d < n; ++d) first(s, d);
      continue;
    }
    for (int toNode = 0; toNode < nodes; ++toNode) first(s, toNode * g + gpu);
  }
  p.depth(2);
  for (int other = 0; other < nodes; ++other) {
    const int r = other * g + gpu;
    for (int toNode = 0; toNode < nodes; ++toNode) {
      if (toNode == other || (r != f && toNode != node)) continue;
      p.chunk(r, gathered, toNode * g, g).copy(toNode * g + gpu, landing, other * g);
    }
  }
  if (!inplace) return;
  for (int s = 0; s < n; ++s)
    if (s != f) {
      p.depth(s / g == node ? 2 : 3);
      p.chunk(f, landing, s).copy(f, kInput, s);
    }
}

// Three-step alltoall for N nodes of G GPUs: all traffic from node a to
// node b goes over one link pair, between GPU (b or b - 1) % G of node a and
// GPU (a or a - 1) % G of node b (the larger node index drops by one, so
// each GPU serves its own share of the node pairs):
//   1. every GPU sends its G blocks for node b to node a's gateway for b;
//   2. the gateway sends all G x G blocks to node b's gateway for a, as one
//      message (or `--channels C` parts on C channels);
//   3. that gateway scatters them to their destinations.
// One cross-node message per node pair instead of G (two-step) or G x G.
void threeStepAllToAll(Program& p) {
  const int n = p.options().ranks;
  const int g = gpusPerNode(p);
  if (g == 0) return;
  const int nodes = n / g;
  const int parts = p.options().channels;
  if (!p.require(g * g % parts == 0, "--channels " + std::to_string(parts) +
                                         " does not divide the " + std::to_string(g * g) +
                                         " blocks of a node pair's message"))
    return;
  const bool inplace = p.options().inplace;
  auto gateway = [g](int node, int peerNode) {
    return node * g + (peerNode > node ? peerNode - 1 : peerNode) % g;
  };
  // Per gateway, G x G blocks for each peer node: [peer node][source gpu][destination gpu].
  Buffer outbound = p.scratch("outbound"), inbound = p.scratch("inbound");
  Buffer landing = inplace ? p.scratch("arrived") : kOutput;
  for (int s = 0; s < n; ++s) {
    const int node = s / g, gpu = s % g;
    for (int toNode = 0; toNode < nodes; ++toNode) {
      if (toNode != node) {  // 1. to the gateway
        p.chunk(s, kInput, toNode * g, g)
            .copy(gateway(node, toNode), outbound, (toNode * g + gpu) * g);
        continue;
      }
      for (int d = toNode * g; d < (toNode + 1) * g; ++d)  // inside the node: directly
        if (!(inplace && s == d)) p.chunk(s, kInput, d).copy(d, landing, s);
    }
  }
  for (int a = 0; a < nodes; ++a)
    for (int b = 0; b < nodes; ++b) {
      if (a == b) continue;
      // 2. one message per node pair, 3. scattered at the far gateway.
      const int from = gateway(a, b), to = gateway(b, a), each = g * g / parts;
      for (int part = 0; part < parts; ++part)
        p.chunk(from, outbound, b * g * g + part * each, each)
            .copy(to, inbound, a * g * g + part * each,
                  parts > 1 ? Hints{.channel = part} : Hints{});
      for (int src = 0; src < g; ++src)
        for (int dst = 0; dst < g; ++dst)
          p.chunk(to, inbound, (a * g + src) * g + dst).copy(b * g + dst, landing, a * g + src);
    }
  if (inplace)
    for (int d = 0; d < n; ++d)
      for (int s = 0; s < n; ++s)
        if (s != d) p.chunk(d, landing, s).copy(d, kInput, s);
}

// Its per-rank form (docs/scale.md): blocks reach their gateway (or, inside
// the node, their destination) at depth 1, cross at 2 and are scattered at
// 3; in place, moves out of scratch follow at 2 (own node) or 4. The node
// pairs the focus takes part in are those of its own node, in the whole
// program's (a, b) order.
void threeStepAllToAllRank(Program& p) {
  const int n = p.options().ranks;
  const int g = gpusPerNode(p);
  if (g == 0) return;
  const int nodes = n / g, parts = p.options().channels;
  if (!p.require(g * g % parts == 0, "--channels " + std::to_string(parts) +
                                         " does not divide the " + std::to_string(g * g) +
                                         " blocks of a node pair's message"))
    return;
  const int f = p.focus(), node = f / g;
  const bool inplace = p.options().inplace;
  auto gateway = [g](int nd, int peerNode) {
    return nd * g + (peerNode > nd ? peerNode - 1 : peerNode) % g;
  };
  Buffer outbound = p.scratch("outbound", nodes >= 2 ? nodes * g * g : 0);
  Buffer inbound = p.scratch("inbound", nodes >= 2 ? nodes * g * g : 0);
  Buffer landing = inplace ? p.scratch("arrived", n >= 2 ? n : 0) : kOutput;
  p.depth(1);
  for (int s = node * g; s < (node + 1) * g; ++s)
    for (int toNode = 0; toNode < nodes; ++toNode) {
      if (toNode != node) {
        if (s == f || gateway(node, toNode) == f)
          p.chunk(s, kInput, toNode * g, g)
              .copy(gateway(node, toNode), outbound, (toNode * g + s % g) * g);
        continue;
      }
      for (int d = toNode * g; d < (toNode + 1) * g; ++d)
        if (!(inplace && s == d) && (s == f || d == f)) p.chunk(s, kInput, d).copy(d, landing, s);
    }
  auto pair = [&](int a, int b) {
    const int from = gateway(a, b), to = gateway(b, a), each = g * g / parts;
    p.depth(2);
    if (from == f || to == f)
      for (int part = 0; part < parts; ++part)
        p.chunk(from, outbound, b * g * g + part * each, each)
            .copy(to, inbound, a * g * g + part * each,
                  parts > 1 ? Hints{.channel = part} : Hints{});
    p.depth(3);
    for (int src = 0; src < g; ++src)
      for (int dst = 0; dst < g; ++dst)
        if (to == f || b * g + dst == f)
          p.chunk(to, inbound, (a * g + src) * g + dst).copy(b * g + dst, landing, a * g + src);
  };
  for (int a = 0; a < nodes; ++a) {
    if (a != node) {
      pair(a, node);
      continue;
    }
    for (int b = 0; b < nodes; ++b)
      if (b != a) pair(a, b);
  }
  if (!inplace) return;
  for (int s = 0; s < n; ++s)
    if (s != f) {
      p.depth(s / g == node ? 2 : 4);
      p.chunk(f, landing, s).copy(f, kInput, s);
    }
}

}  // namespace

void addHierarchicalPrograms(std::vector<ProgramEntry>& out) {
  out.push_back({"twostep_alltoall",
                 "blocks gather at the GPU with the destination's index inside the node, then "
                 "one message per node pair and GPU (--gpus-per-node G)",
                 "alltoall",
                 "any (G divides it)",
                 [](int n) { return n >= 1; },
                 [](const ProgramOptions&) { return 1; },
                 twoStepAllToAll,
                 {"gpus-per-node"},
                 twoStepAllToAllRank});
  out.push_back({"threestep_alltoall",
                 "blocks gather at one gateway GPU per node pair, one message crosses per node "
                 "pair, the far gateway scatters (--gpus-per-node G; --channels C parts)",
                 "alltoall",
                 "any (G divides it)",
                 [](int n) { return n >= 1; },
                 [](const ProgramOptions&) { return 1; },
                 threeStepAllToAll,
                 {"gpus-per-node", "channels"},
                 threeStepAllToAllRank});
  out.push_back({"hierarchical_allreduce",
                 "ring reduce-scatter in each node, ring allreduce across nodes, ring "
                 "allgather in each node (--gpus-per-node G)",
                 "allreduce",
                 "any (G divides it)",
                 [](int n) { return n >= 1; },
                 [](const ProgramOptions& o) { return o.ranks; },
                 hierarchicalAllReduce,
                 {"gpus-per-node"},
                 hierarchicalAllReduceRank});
}

}  // namespace chorus::lang
