// The two allreduce algorithms for NVIDIA machines that MSCCLang's paper
// writes in its language.
//
// DGX-1 (8 GPUs per node, NVLink rings): inside each node the buffer is
// summed along the ring order 1 3 2 6 7 5 4 0, so the node's sum ends at
// GPU 0. Each node's GPU 0 sends that partial to the first GPU of the ring
// (GPU 1) of every other node, which passes it on to its GPU 0 to be added;
// then the total goes back along the ring in reverse. The paper's version
// is for two nodes; any number of nodes works the same way.
//
// NDv2 (8 GPUs, two sockets of 4, the buffer in 8 chunks):
//   1. inside each socket, GPU j collects the socket's sum of chunks 2j and
//      2j + 1 from the other three;
//   2. across sockets, GPU j and GPU j + 4 each complete one of the two
//      chunks (2j at the upper GPU, 2j + 1 at the lower) and send it back;
//   3. inside each socket, every GPU sends its two finished chunks to the
//      other three.
#include <tuple>

#include "lang/programs/programs.h"

namespace chorus::lang {

namespace {

constexpr int kDgx1Gpus = 8;
constexpr int kDgx1Ring[kDgx1Gpus] = {1, 3, 2, 6, 7, 5, 4, 0};

void dgx1AllReduce(Program& p) {
  const int nodes = p.options().ranks / kDgx1Gpus;
  // The rank at position `at` of node `node`'s ring.
  auto rank = [](int node, int at) { return node * kDgx1Gpus + kDgx1Ring[at]; };
  const int last = kDgx1Gpus - 1;
  for (int node = 0; node < nodes; ++node) {
    Chunk c = p.chunk(rank(node, 0), kInput, 0);
    for (int at = 1; at < kDgx1Gpus; ++at)
      c = p.chunk(rank(node, at), kInput, 0).reduce(c, kOutput, 0);
  }
  // Every node's partial to the ring start of every other node, then added
  // at that node's ring end.
  Buffer remote = p.scratch("remote");
  for (int from = 0; from < nodes; ++from)
    for (int to = 0; to < nodes; ++to)
      if (to != from) p.chunk(rank(from, last), kOutput, 0).copy(rank(to, 0), remote, from);
  for (int to = 0; to < nodes; ++to)
    for (int from = 0; from < nodes; ++from)
      if (to != from)
        p.chunk(rank(to, last), kOutput, 0).reduce(p.chunk(rank(to, 0), remote, from));
  for (int node = 0; node < nodes; ++node) {
    Chunk c = p.chunk(rank(node, last), kOutput, 0);
    for (int at = last - 1; at >= 0; --at) c = c.copy(rank(node, at), kOutput, 0);
  }
}

// Its per-rank form (docs/scale.md): the ring's hop at position s is at
// depth s (7 at the ring's end), the node sums cross at 8, the ring end
// adds the i-th of them at 8 + i, and the total goes back one hop a depth.
void dgx1AllReduceRank(Program& p) {
  const int nodes = p.options().ranks / kDgx1Gpus, f = p.focus(), node = f / kDgx1Gpus;
  auto rank = [](int n, int at) { return n * kDgx1Gpus + kDgx1Ring[at]; };
  const int last = kDgx1Gpus - 1;
  int at = 0;
  while (rank(node, at) != f) ++at;
  const RingOf ring{kDgx1Gpus, [&](int i) { return rank(node, i); }, at};
  reduceAroundRank(
      p, ring, kInput, 0, 1, 0, {},
      [](int) {
        return std::pair{kOutput, 0};
      },
      0);
  Buffer remote = p.scratch("remote", nodes >= 2 ? nodes : 0);
  p.depth(kDgx1Gpus);
  for (int other = 0; other < nodes; ++other) {
    if (other == node) continue;
    if (at == last) p.chunk(f, kOutput, 0).copy(rank(other, 0), remote, node);
    if (at == 0) p.chunk(rank(other, last), kOutput, 0).copy(f, remote, other);
  }
  for (int other = 0, i = 1; other < nodes && (at == 0 || at == last); ++other)
    if (other != node) {
      p.depth(kDgx1Gpus + i++);
      p.chunk(rank(node, last), kOutput, 0).reduce(p.chunk(rank(node, 0), remote, other));
    }
  const RingOf back{kDgx1Gpus, [&](int i) { return rank(node, last - i); }, last - at};
  copyAroundRank(p, back, {0, kOutput, 0}, 0, 1, {}, nodes >= 2 ? last + nodes : last);
}

void ndv2AllReduce(Program& p) {
  constexpr int kSocket = 4;
  auto socketOf = [](int r) { return r / kSocket * kSocket; };
  // 1. GPU j of each socket sums chunks 2j, 2j + 1 of its socket.
  for (int r = 0; r < 2 * kSocket; ++r) {
    const int j = r % kSocket, index = 2 * j;
    Chunk sum = p.chunk(r, kInput, index, 2);
    for (int q = socketOf(r); q < socketOf(r) + kSocket; ++q)
      if (q != r) sum = sum.reduce(p.chunk(q, kInput, index, 2), kOutput, index);
  }
  // 2. Chunk 2j completes at GPU j + 4, chunk 2j + 1 at GPU j; each goes back.
  for (int j = 0; j < kSocket; ++j) {
    const int lower = j, upper = j + kSocket;
    p.chunk(upper, kOutput, 2 * j)
        .reduce(p.chunk(lower, kOutput, 2 * j))
        .copy(lower, kOutput, 2 * j);
    p.chunk(lower, kOutput, 2 * j + 1)
        .reduce(p.chunk(upper, kOutput, 2 * j + 1))
        .copy(upper, kOutput, 2 * j + 1);
  }
  // 3. Each GPU's two finished chunks to the rest of its socket.
  for (int r = 0; r < 2 * kSocket; ++r) {
    const int index = 2 * (r % kSocket);
    for (int q = socketOf(r); q < socketOf(r) + kSocket; ++q)
      if (q != r) p.chunk(r, kOutput, index, 2).copy(q, kOutput, index);
  }
}

// Its per-rank form (docs/scale.md): a GPU's sum grows by one socket peer a
// depth (1..3), the cross-socket reductions are at 4 and their results go
// back at 5, the finished chunks go round the socket at 6.
void ndv2AllReduceRank(Program& p) {
  constexpr int kSocket = 4;
  const int f = p.focus(), socket = f / kSocket * kSocket;
  for (int r = socket; r < socket + kSocket; ++r) {
    const int index = 2 * (r % kSocket);
    Chunk sum = p.chunk(r, kInput, index, 2);
    for (int q = socket, i = 1; q < socket + kSocket; ++q)
      if (q != r) {
        p.depth(i++);
        sum = sum.reduce(p.chunk(q, kInput, index, 2), kOutput, index);
      }
  }
  const int j = f % kSocket, lower = j, upper = j + kSocket;
  for (auto [at, other, index] : {std::tuple{upper, lower, 2 * j}, {lower, upper, 2 * j + 1}}) {
    p.depth(4);
    Chunk done = p.chunk(at, kOutput, index).reduce(p.chunk(other, kOutput, index));
    p.depth(5);
    done.copy(other, kOutput, index);
  }
  p.depth(6);
  for (int r = socket; r < socket + kSocket; ++r) {
    const int index = 2 * (r % kSocket);
    for (int q = socket; q < socket + kSocket; ++q)
      if (q != r && (r == f || q == f)) p.chunk(r, kOutput, index, 2).copy(q, kOutput, index);
  }
}

}  // namespace

void addNvidiaPrograms(std::vector<ProgramEntry>& out) {
  out.push_back({"dgx1_allreduce",
                 "DGX-1 (MSCCLang paper): sum along each node's NVLink ring, exchange node sums "
                 "between ring ends, send the total back along the ring",
                 "allreduce",
                 "multiples of 8",
                 [](int n) { return n >= 8 && n % kDgx1Gpus == 0; },
                 [](const ProgramOptions&) { return 1; },
                 dgx1AllReduce,
                 {},
                 dgx1AllReduceRank});
  out.push_back({"ndv2_allreduce",
                 "NDv2 (MSCCLang paper): reduce-scatter in each socket, exchange across sockets, "
                 "allgather in each socket",
                 "allreduce",
                 "8",
                 [](int n) { return n == 8; },
                 [](const ProgramOptions&) { return 8; },
                 ndv2AllReduce,
                 {},
                 ndv2AllReduceRank});
}

}  // namespace chorus::lang
