#include "algorithms/classic.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace chorus::algorithms {

using ir::Buffer;
using ir::StepType;

namespace {

constexpr Buffer kI = Buffer::kInput;
constexpr Buffer kO = Buffer::kOutput;
constexpr Buffer kS = Buffer::kScratch;

int mod(int a, int n) { return ((a % n) + n) % n; }

// The largest power of two <= n (n >= 1): the ranks that recursive
// doubling and halving pair up; the others fold into rank r - p.
int powerOfTwoBelow(int n) { return static_cast<int>(std::bit_floor(static_cast<unsigned>(n))); }

// Recursive doubling and halving with folded ranks: beside the range [lo,
// lo + len) of the first p ranks' blocks, a rank carries the folded ranks'
// blocks lo + p, ...: how many of them there are among n.
int foldedBlocks(int lo, int len, int p, int n) {
  return std::max(0, std::min(n, lo + len + p) - (lo + p));
}

// A chunk reference: buffer and first chunk index.
struct Ref {
  Buffer buf;
  int off;
};

// Builds an algorithm tb by tb. Steps name their local operands; for steps
// that have only one (s reads src, r writes dst) the other is set equal, as
// msccl-tools writes them.
class Builder {
 public:
  // `focus` >= 0: only that rank's threadblocks are built (ranks() is just
  // it); the other ranks keep their ids and chunk counts, with no threadblocks.
  Builder(std::string name, CollectiveKind coll, int n, int focus, int nchunks, int inChunks,
          int outChunks, int scratchChunks = 0)
      : n_(n), focus_(focus) {
    a_.name = std::move(name);
    a_.collective = coll;
    a_.collectiveName = std::string(collectiveName(coll));
    a_.ngpus = n;
    a_.nchunksPerLoop = nchunks;
    a_.nchannels = 1;
    a_.protocol = ir::Protocol::kSimple;
    a_.inplace = true;
    a_.outofplace = true;
    for (int r = 0; r < n; ++r) {
      ir::Rank rank;
      rank.id = r;
      rank.inputChunks = inChunks;
      rank.outputChunks = outChunks;
      rank.scratchChunks = scratchChunks;
      a_.ranks.push_back(std::move(rank));
    }
  }

  // Adds a threadblock to `rank`; returns its id.
  int tb(int rank, int sendPeer, int recvPeer) {
    auto& tbs = a_.ranks[static_cast<size_t>(rank)].tbs;
    ir::Threadblock t;
    t.id = static_cast<int>(tbs.size());
    t.sendPeer = sendPeer;
    t.recvPeer = recvPeer;
    tbs.push_back(std::move(t));
    return tbs.back().id;
  }

  // Appends a step; returns its index within the tb.
  int step(int rank, int tb, StepType type, Ref src, Ref dst, int cnt = 1,
           std::pair<int, int> dep = {-1, -1}) {
    ir::Threadblock& t = a_.ranks[static_cast<size_t>(rank)].tbs[static_cast<size_t>(tb)];
    ir::Step s;
    s.type = type;
    s.srcBuf = src.buf;
    s.srcOff = src.off;
    s.dstBuf = dst.buf;
    s.dstOff = dst.off;
    s.count = cnt;
    s.depTb = dep.first;
    s.depStep = dep.second;
    t.steps.push_back(s);
    return static_cast<int>(t.steps.size()) - 1;
  }
  int send(int rank, int tb, Ref src, int cnt = 1, std::pair<int, int> dep = {-1, -1}) {
    return step(rank, tb, StepType::kSend, src, src, cnt, dep);
  }
  int recv(int rank, int tb, Ref dst, int cnt = 1, std::pair<int, int> dep = {-1, -1}) {
    return step(rank, tb, StepType::kRecv, dst, dst, cnt, dep);
  }

  // The ranks whose threadblocks the generator builds: all, or the focus.
  std::vector<int> ranks() const {
    if (focus_ >= 0) return {focus_};
    std::vector<int> all(static_cast<size_t>(n_));
    for (int r = 0; r < n_; ++r) all[static_cast<size_t>(r)] = r;
    return all;
  }

  // Out-of-place calls only (e.g. no scratch to stage an in-place exchange).
  void outOfPlaceOnly() { a_.inplace = false; }

  ir::Algorithm finish() && {
    // hasdep marks every step another step waits for (docs/spec/IR.md section 4).
    for (ir::Rank& r : a_.ranks)
      for (ir::Threadblock& t : r.tbs)
        for (ir::Step& s : t.steps)
          if (s.depTb >= 0)
            r.tbs[static_cast<size_t>(s.depTb)].steps[static_cast<size_t>(s.depStep)].hasDep = true;
    return std::move(a_);
  }

 private:
  int n_;
  int focus_;
  ir::Algorithm a_;
};

// A rank alone: out-of-place calls copy input to output.
ir::Algorithm single(std::string name, CollectiveKind coll) {
  Builder b(std::move(name), coll, 1, -1, 1, 1, 1);
  int t = b.tb(0, -1, -1);
  b.step(0, t, StepType::kCopy, {kI, 0}, {kO, 0});
  return std::move(b).finish();
}

}  // namespace

ir::Algorithm ringAllReduce(int n, int focus) {
  if (n == 1) return single("ring_allreduce", CollectiveKind::kAllReduce);
  Builder b("ring_allreduce", CollectiveKind::kAllReduce, n, focus, n, n, n);
  for (int r : b.ranks()) {
    int t = b.tb(r, mod(r + 1, n), mod(r - 1, n));
    // Reduce-scatter: at step k rank r passes on chunk r-k; it finishes
    // chunk r+1 at step n-1.
    b.send(r, t, {kI, r});
    for (int k = 1; k < n - 1; ++k) {
      int c = mod(r - k, n);
      b.step(r, t, StepType::kRecvReduceSend, {kI, c}, {kI, c});
    }
    int fin = mod(r + 1, n);
    b.step(r, t, StepType::kRecvReduceCopySend, {kI, fin}, {kO, fin});
    // Allgather: receive the finished chunks r, r-1, ..., r+2.
    for (int j = 0; j < n - 1; ++j) {
      int c = mod(r - j, n);
      if (j < n - 2)
        b.step(r, t, StepType::kRecvCopySend, {kO, c}, {kO, c});
      else
        b.recv(r, t, {kO, c});
    }
  }
  return std::move(b).finish();
}

ir::Algorithm chainAllReduce(int n, int focus) {
  if (n == 1) return single("chain_allreduce", CollectiveKind::kAllReduce);
  Builder b("chain_allreduce", CollectiveKind::kAllReduce, n, focus, 1, 1, 1);
  for (int r : b.ranks()) {
    int t = b.tb(r, r + 1 < n ? r + 1 : r - 1, r > 0 ? r - 1 : r + 1);
    if (r == 0) {
      b.send(r, t, {kI, 0});
      b.recv(r, t, {kO, 0});
    } else if (r < n - 1) {
      // Up: partial sums to r+1 on tb t; down: the result from r+1 on tb d.
      b.step(r, t, StepType::kRecvReduceSend, {kI, 0}, {kI, 0});
      int d = b.tb(r, r - 1, r + 1);
      b.step(r, d, StepType::kRecvCopySend, {kO, 0}, {kO, 0});
    } else {
      b.step(r, t, StepType::kRecvReduceCopySend, {kI, 0}, {kO, 0});
    }
  }
  return std::move(b).finish();
}

ir::Algorithm halvingDoublingAllReduce(int n, int focus) {
  if (n == 1) return single("halving_doubling_allreduce", CollectiveKind::kAllReduce);
  const int p = powerOfTwoBelow(n);
  Builder b("halving_doubling_allreduce", CollectiveKind::kAllReduce, n, focus, p, p, p);
  for (int r : b.ranks()) {
    if (r >= p) {
      // An extra rank: its data goes to partner r-p, the result comes back.
      int t = b.tb(r, r - p, r - p);
      b.send(r, t, {kI, 0}, p);
      b.recv(r, t, {kO, 0}, p);
      continue;
    }
    bool folds = r + p < n;
    int fold = folds ? b.tb(r, r + p, r + p) : -1;
    std::pair<int, int> last{-1, -1};  // the step the next one waits for
    Buffer cur = kI;                   // where this rank's partial sums are
    if (folds) {
      int s = b.step(r, fold, StepType::kRecvReduceCopy, {kI, 0}, {kO, 0}, p);
      last = {fold, s};
      cur = kO;
    }
    // Halving: distance d = p/2 ... 1, one tb per partner.
    std::vector<int> tbOf;
    std::vector<std::pair<int, int>> ranges;  // (lo, len) before each step
    int lo = 0, len = p;
    for (int d = p / 2; d >= 1; d /= 2) {
      int q = r ^ d;
      int t = b.tb(r, q, q);
      tbOf.push_back(t);
      ranges.emplace_back(lo, len);
      int half = len / 2;
      int keep = (r & d) == 0 ? lo : lo + half;
      int give = (r & d) == 0 ? lo + half : lo;
      b.send(r, t, {cur, give}, half, last);
      int s = b.step(r, t, StepType::kRecvReduceCopy, {cur, keep}, {kO, keep}, half);
      last = {t, s};
      cur = kO;
      lo = keep;
      len = half;
    }
    // Doubling: distance 1 ... p/2 on the same tbs, in reverse.
    for (size_t k = tbOf.size(); k-- > 0;) {
      int t = tbOf[k];
      int d = p >> (k + 1);
      // The partner owns the other half of the range this step rebuilds.
      int plo = (r & d) == 0 ? lo + len : lo - len;
      b.send(r, t, {kO, lo}, len, last.first == t ? std::pair{-1, -1} : last);
      int s = b.recv(r, t, {kO, plo}, len);
      last = {t, s};
      lo = std::min(lo, plo);
      len *= 2;
      (void)ranges;
    }
    if (folds) b.send(r, fold, {kO, 0}, p, last);
  }
  return std::move(b).finish();
}

ir::Algorithm recursiveDoublingAllReduce(int n, int focus) {
  if (n == 1) return single("recursive_doubling_allreduce", CollectiveKind::kAllReduce);
  const int p = powerOfTwoBelow(n);
  Builder b("recursive_doubling_allreduce", CollectiveKind::kAllReduce, n, focus, 1, 1, 1);
  for (int r : b.ranks()) {
    if (r >= p) {
      // An extra rank: its data goes to partner r-p, the result comes back.
      int t = b.tb(r, r - p, r - p);
      b.send(r, t, {kI, 0});
      b.recv(r, t, {kO, 0});
      continue;
    }
    bool folds = r + p < n;
    int fold = folds ? b.tb(r, r + p, r + p) : -1;
    std::pair<int, int> last{-1, -1};  // the step the next one waits for
    Buffer cur = kI;                   // where this rank's partial sum is
    if (folds) {
      last = {fold, b.step(r, fold, StepType::kRecvReduceCopy, {kI, 0}, {kO, 0})};
      cur = kO;
    }
    // Distance 1, 2, ... p/2: swap whole partial sums with the partner.
    for (int d = 1; d < p; d *= 2) {
      int t = b.tb(r, r ^ d, r ^ d);
      b.send(r, t, {cur, 0}, 1, last);
      last = {t, b.step(r, t, StepType::kRecvReduceCopy, {cur, 0}, {kO, 0})};
      cur = kO;
    }
    if (folds) b.send(r, fold, {kO, 0}, 1, last);
  }
  return std::move(b).finish();
}

ir::Algorithm ringAllGather(int n, int focus) {
  if (n == 1) return single("ring_allgather", CollectiveKind::kAllGather);
  Builder b("ring_allgather", CollectiveKind::kAllGather, n, focus, n, 1, n);
  for (int r : b.ranks()) {
    int t = b.tb(r, mod(r + 1, n), mod(r - 1, n));
    b.step(r, t, StepType::kCopy, {kI, 0}, {kO, r});
    b.send(r, t, {kI, 0});
    for (int j = 1; j < n; ++j) {
      int c = mod(r - j, n);
      if (j < n - 1)
        b.step(r, t, StepType::kRecvCopySend, {kO, c}, {kO, c});
      else
        b.recv(r, t, {kO, c});
    }
  }
  return std::move(b).finish();
}

ir::Algorithm ringReduceScatter(int n, int focus) {
  if (n == 1) return single("ring_reducescatter", CollectiveKind::kReduceScatter);
  Builder b("ring_reducescatter", CollectiveKind::kReduceScatter, n, focus, n, n, 1);
  for (int r : b.ranks()) {
    int t = b.tb(r, mod(r + 1, n), mod(r - 1, n));
    // At step k rank r passes on chunk r-1-k; chunk r ends here last.
    b.send(r, t, {kI, mod(r - 1, n)});
    for (int k = 1; k < n - 1; ++k) {
      int c = mod(r - 1 - k, n);
      b.step(r, t, StepType::kRecvReduceSend, {kI, c}, {kI, c});
    }
    b.step(r, t, StepType::kRecvReduceCopy, {kI, r}, {kO, 0});
  }
  return std::move(b).finish();
}

ir::Algorithm pairwiseAllToAll(int n, int focus) {
  if (n == 1) return single("pairwise_alltoall", CollectiveKind::kAllToAll);
  // In place, chunk c of the buffer is both what goes to rank c and where
  // rank c's data lands: receive into scratch, copy after chunk c has left.
  Builder b("pairwise_alltoall", CollectiveKind::kAllToAll, n, focus, n, n, n, n);
  for (int r : b.ranks()) {
    std::vector<int> tbs(static_cast<size_t>(n), -1);
    for (int k = 1; k < n; ++k) tbs[static_cast<size_t>(k)] = b.tb(r, mod(r + k, n), mod(r - k, n));
    b.step(r, tbs[1], StepType::kCopy, {kI, r}, {kO, r});
    for (int k = 1; k < n; ++k) b.send(r, tbs[static_cast<size_t>(k)], {kI, mod(r + k, n)});
    for (int k = 1; k < n; ++k) {
      int t = tbs[static_cast<size_t>(k)];
      int from = mod(r - k, n);
      b.recv(r, t, {kS, from});
      // Chunk `from` leaves this rank on the tb of round n-k (step 0, or
      // step 1 on tb 1 which starts with the local copy).
      int sender = tbs[static_cast<size_t>(n - k)];
      std::pair<int, int> dep{sender, n - k == 1 ? 1 : 0};
      if (sender == t) dep = {-1, -1};  // same tb: program order suffices
      b.step(r, t, StepType::kCopy, {kS, from}, {kO, from}, 1, dep);
    }
  }
  return std::move(b).finish();
}

// log2(p) exchanges at distance 1, 2, ..., p/2 (p the largest power of
// two <= n): each rank swaps every block it holds with its partner one bit
// apart, so the range it holds doubles. A rank r >= p hands its block to
// r - p first, which carries it along (its range's blocks + p), and takes
// the whole output back at the end. log2 p messages per rank instead of
// n - 1 (the direct form) or n - 1 rounds (the ring).
ir::Algorithm recursiveDoublingAllGather(int n, int focus) {
  if (n == 1) return single("recursive_doubling_allgather", CollectiveKind::kAllGather);
  const int p = powerOfTwoBelow(n);
  Builder b("recursive_doubling_allgather", CollectiveKind::kAllGather, n, focus, n, 1, n);
  for (int r : b.ranks()) {
    if (r >= p) {
      int t = b.tb(r, r - p, r - p);
      b.send(r, t, {kI, 0});
      b.recv(r, t, {kO, 0}, n);
      continue;
    }
    const bool folds = r + p < n;
    const int fold = folds ? b.tb(r, r + p, r + p) : -1;
    const int foldRecv = folds ? b.recv(r, fold, {kO, r + p}) : -1;
    std::pair<int, int> last{-1, -1};  // the receive the next exchange waits for
    int lo = r, len = 1;
    for (int d = 1; d < p; d *= 2) {
      const int t = b.tb(r, r ^ d, r ^ d);
      const int plo = (r & d) == 0 ? lo + len : lo - len;
      if (d == 1) b.step(r, t, StepType::kCopy, {kI, 0}, {kO, r});
      b.send(r, t, {kO, lo}, len, last);
      if (const int e = foldedBlocks(lo, len, p, n); e > 0)
        b.send(r, t, {kO, lo + p}, e, d == 1 ? std::pair{fold, foldRecv} : std::pair{-1, -1});
      last = {t, b.recv(r, t, {kO, plo}, len)};
      if (const int e = foldedBlocks(plo, len, p, n); e > 0)
        last = {t, b.recv(r, t, {kO, plo + p}, e)};
      lo = std::min(lo, plo);
      len *= 2;
    }
    if (folds) b.send(r, fold, {kO, 0}, n, last);
  }
  return std::move(b).finish();
}

// Every rank sends its block to every other rank at once: tb k sends to
// r+k and receives from r-k. Every message is a plain send of the input
// (one copy per byte where the receiver reads the sender's memory) and every
// block travels one hop (one round of latency instead of the ring's n-1).
ir::Algorithm directAllGather(int n, int focus) {
  if (n == 1) return single("direct_allgather", CollectiveKind::kAllGather);
  Builder b("direct_allgather", CollectiveKind::kAllGather, n, focus, n, 1, n);
  for (int r : b.ranks()) {
    std::vector<int> tbs(static_cast<size_t>(n), -1);
    for (int k = 1; k < n; ++k) tbs[static_cast<size_t>(k)] = b.tb(r, mod(r + k, n), mod(r - k, n));
    b.step(r, tbs[1], StepType::kCopy, {kI, 0}, {kO, r});
    for (int k = 1; k < n; ++k) {
      // In place the copy writes what the sends read (the same chunk):
      // they wait for it.
      std::pair<int, int> dep = k == 1 ? std::make_pair(-1, -1) : std::make_pair(tbs[1], 0);
      b.send(r, tbs[static_cast<size_t>(k)], {kI, 0}, 1, dep);
      b.recv(r, tbs[static_cast<size_t>(k)], {kO, mod(r - k, n)});
    }
  }
  return std::move(b).finish();
}

// Recursive halving at distance p/2, ..., 2, 1 (p the largest power of two
// <= n): each rank sends its partner the partial sums of the half of its
// range the partner keeps and adds the partner's to the half it keeps, so
// the range halves; log2 p messages per rank. A rank r >= p hands its whole
// input to r - p first, which carries its blocks along (its range's blocks
// + p), and takes its sum back at the end. Partial sums go to scratch.
ir::Algorithm recursiveHalvingReduceScatter(int n, int focus) {
  if (n == 1) return single("recursive_halving_reducescatter", CollectiveKind::kReduceScatter);
  const int p = powerOfTwoBelow(n);
  Builder b("recursive_halving_reducescatter", CollectiveKind::kReduceScatter, n, focus, n, n, 1,
            n);
  for (int r : b.ranks()) {
    if (r >= p) {
      int t = b.tb(r, r - p, r - p);
      b.send(r, t, {kI, 0}, n);
      b.recv(r, t, {kO, 0});
      continue;
    }
    const bool folds = r + p < n;
    const int fold = folds ? b.tb(r, r + p, r + p) : -1;
    std::pair<int, int> last{-1, -1};  // the sum the next exchange waits for
    Buffer cur = kI;                   // where this rank's partial sums are
    if (folds) {
      last = {fold, b.step(r, fold, StepType::kRecvReduceCopy, {kI, 0}, {kS, 0}, n)};
      cur = kS;
    }
    int lo = 0, len = p;
    for (int d = p / 2; d >= 1; d /= 2) {
      const int t = b.tb(r, r ^ d, r ^ d);
      const int half = len / 2;
      const int keep = (r & d) == 0 ? lo : lo + half;
      const int give = (r & d) == 0 ? lo + half : lo;
      b.send(r, t, {cur, give}, half, last);
      if (const int e = foldedBlocks(give, half, p, n); e > 0) b.send(r, t, {cur, give + p}, e);
      // The last exchange leaves this rank's own sum: straight to the output.
      const Ref sum = d == 1 ? Ref{kO, 0} : Ref{kS, keep};
      last = {t, b.step(r, t, StepType::kRecvReduceCopy, {cur, keep}, sum, half)};
      if (const int e = foldedBlocks(keep, half, p, n); e > 0)
        last = {t, b.step(r, t, StepType::kRecvReduceCopy, {cur, keep + p}, {kS, keep + p}, e)};
      cur = kS;
      lo = keep;
      len = half;
    }
    if (folds) b.send(r, fold, {kS, r + p}, 1, last);
  }
  return std::move(b).finish();
}

// Every rank sends each block straight to its owner at once (tb k: to r+k,
// from r-k), and the owner adds what arrives to its own block: one round of
// latency instead of the ring's n-1, at the price of n-1 messages per rank.
// The sums chain from tb to tb (each receive-reduce waits for the one
// before), so the owner's block is written by one step at a time. In place
// the owner's block is its input block r, which no send reads.
ir::Algorithm directReduceScatter(int n, int focus) {
  if (n == 1) return single("direct_reducescatter", CollectiveKind::kReduceScatter);
  Builder b("direct_reducescatter", CollectiveKind::kReduceScatter, n, focus, n, n, 1);
  for (int r : b.ranks()) {
    std::pair<int, int> last{-1, -1};
    for (int k = 1; k < n; ++k) {
      const int t = b.tb(r, mod(r + k, n), mod(r - k, n));
      b.send(r, t, {kI, mod(r + k, n)});
      const Ref sum = k == 1 ? Ref{kI, r} : Ref{kO, 0};
      last = {t, b.step(r, t, StepType::kRecvReduceCopy, sum, {kO, 0}, 1, last)};
    }
  }
  return std::move(b).finish();
}

// pairwise_alltoall without the scratch: out of place, each block goes from
// the sender's input straight to the receiver's output.
ir::Algorithm directAllToAll(int n, int focus) {
  if (n == 1) return single("direct_alltoall", CollectiveKind::kAllToAll);
  Builder b("direct_alltoall", CollectiveKind::kAllToAll, n, focus, n, n, n);
  b.outOfPlaceOnly();
  for (int r : b.ranks()) {
    std::vector<int> tbs(static_cast<size_t>(n), -1);
    for (int k = 1; k < n; ++k) tbs[static_cast<size_t>(k)] = b.tb(r, mod(r + k, n), mod(r - k, n));
    b.step(r, tbs[1], StepType::kCopy, {kI, r}, {kO, r});
    for (int k = 1; k < n; ++k) {
      b.send(r, tbs[static_cast<size_t>(k)], {kI, mod(r + k, n)});
      b.recv(r, tbs[static_cast<size_t>(k)], {kO, mod(r - k, n)});
    }
  }
  return std::move(b).finish();
}

ir::Algorithm chainBroadcast(int n, int root, int focus) {
  if (n == 1) return single("chain_broadcast", CollectiveKind::kBroadcast);
  Builder b("chain_broadcast", CollectiveKind::kBroadcast, n, focus, 1, 1, 1);
  for (int r : b.ranks()) {
    int k = mod(r - root, n);  // r's place down the chain
    int next = k + 1 < n ? mod(r + 1, n) : -1;
    int t = b.tb(r, next, k > 0 ? mod(r - 1, n) : -1);
    if (k == 0) {
      b.step(r, t, StepType::kCopy, {kI, 0}, {kO, 0});
      b.send(r, t, {kI, 0});
    } else if (next >= 0) {
      b.step(r, t, StepType::kRecvCopySend, {kO, 0}, {kO, 0});
    } else {
      b.recv(r, t, {kO, 0});
    }
  }
  return std::move(b).finish();
}

ir::Algorithm chainReduce(int n, int root, int focus) {
  if (n == 1) return single("chain_reduce", CollectiveKind::kReduce);
  Builder b("chain_reduce", CollectiveKind::kReduce, n, focus, 1, 1, 1);
  // Partial sums flow root+1 -> root+2 -> ... -> root.
  for (int r : b.ranks()) {
    int k = mod(r - root - 1, n) + 1;  // r's place up the chain: root+1 is 1, the root n
    int prev = k > 1 ? mod(r - 1, n) : -1;
    int t = b.tb(r, r == root ? -1 : mod(r + 1, n), prev);
    if (k == 1)
      b.send(r, t, {kI, 0});
    else if (r != root)
      b.step(r, t, StepType::kRecvReduceSend, {kI, 0}, {kI, 0});
    else
      b.step(r, t, StepType::kRecvReduceCopy, {kI, 0}, {kO, 0});
  }
  return std::move(b).finish();
}

ir::Algorithm directGather(int n, int root, int focus) {
  if (n == 1) return single("direct_gather", CollectiveKind::kGather);
  // Every rank sends its chunk straight to the root, which receives each on
  // a threadblock of its own.
  Builder b("direct_gather", CollectiveKind::kGather, n, focus, n, 1, n);
  for (int r : b.ranks()) {
    if (r != root) {
      b.send(r, b.tb(r, root, -1), {kI, 0});
      continue;
    }
    int own = b.tb(r, -1, -1);
    b.step(r, own, StepType::kCopy, {kI, 0}, {kO, r});
    for (int q = 0; q < n; ++q)
      if (q != root) b.recv(r, b.tb(r, -1, q), {kO, q});
  }
  return std::move(b).finish();
}

ir::Algorithm directScatter(int n, int root, int focus) {
  if (n == 1) return single("direct_scatter", CollectiveKind::kScatter);
  Builder b("direct_scatter", CollectiveKind::kScatter, n, focus, n, n, 1);
  for (int r : b.ranks()) {
    if (r != root) {
      b.recv(r, b.tb(r, -1, root), {kO, 0});
      continue;
    }
    int own = b.tb(r, -1, -1);
    b.step(r, own, StepType::kCopy, {kI, r}, {kO, 0});
    for (int q = 0; q < n; ++q)
      if (q != root) b.send(r, b.tb(r, q, -1), {kI, q});
  }
  return std::move(b).finish();
}

const std::vector<ClassicInfo>& classicAlgorithms() {
  static const std::vector<ClassicInfo> all = {
      {"ring_allreduce", CollectiveKind::kAllReduce,
       "reduce-scatter + allgather around a ring; n chunks, 2(n-1) steps"},
      {"halving_doubling_allreduce", CollectiveKind::kAllReduce,
       "recursive halving then doubling; 2 log2 n steps (+2 for non-powers of two)"},
      {"recursive_doubling_allreduce", CollectiveKind::kAllReduce,
       "whole vectors swapped at distance 1, 2, 4...; log2 n steps (+2 for non-powers of two)"},
      {"chain_allreduce", CollectiveKind::kAllReduce,
       "reduce up a chain, broadcast back down; 1 chunk, any count"},
      {"ring_allgather", CollectiveKind::kAllGather, "ring; n-1 steps"},
      {"recursive_doubling_allgather", CollectiveKind::kAllGather,
       "the held range swapped at distance 1, 2, 4...; log2 n steps (+2 for non-powers of two)"},
      {"direct_allgather", CollectiveKind::kAllGather,
       "every rank sends its block to every other at once; 1 step per peer"},
      {"ring_reducescatter", CollectiveKind::kReduceScatter, "ring; n-1 steps"},
      {"recursive_halving_reducescatter", CollectiveKind::kReduceScatter,
       "partial sums of the partner's half swapped at distance n/2, ..., 2, 1; log2 n steps (+2 "
       "for non-powers of two)"},
      {"direct_reducescatter", CollectiveKind::kReduceScatter,
       "every block straight to its owner, summed there as it arrives; 1 round"},
      {"pairwise_alltoall", CollectiveKind::kAllToAll,
       "round k: send to r+k, receive from r-k; n-1 concurrent rounds"},
      {"direct_alltoall", CollectiveKind::kAllToAll,
       "pairwise_alltoall out of place, received straight into the output"},
      {"chain_broadcast", CollectiveKind::kBroadcast, "pipelined chain from the root"},
      {"chain_reduce", CollectiveKind::kReduce, "pipelined chain ending at the root"},
      {"direct_gather", CollectiveKind::kGather, "every rank sends to the root; one step"},
      {"direct_scatter", CollectiveKind::kScatter, "the root sends to every rank; one step"},
  };
  return all;
}

Result<ir::Algorithm> makeClassic(std::string_view name, int n, int root, int focus) {
  if (n < 1) return Status(StatusCode::kInvalidArgument, "world size must be >= 1");
  if (root < 0 || root >= n)
    return Status(StatusCode::kInvalidArgument,
                  "root " + std::to_string(root) + " is not a rank of " + std::to_string(n));
  if (focus < -1 || focus >= n)
    return Status(StatusCode::kInvalidArgument,
                  "rank " + std::to_string(focus) + " is not a rank of " + std::to_string(n));
  if (name == "ring_allreduce") return ringAllReduce(n, focus);
  if (name == "halving_doubling_allreduce") return halvingDoublingAllReduce(n, focus);
  if (name == "recursive_doubling_allreduce") return recursiveDoublingAllReduce(n, focus);
  if (name == "chain_allreduce") return chainAllReduce(n, focus);
  if (name == "ring_allgather") return ringAllGather(n, focus);
  if (name == "ring_reducescatter") return ringReduceScatter(n, focus);
  if (name == "direct_reducescatter") return directReduceScatter(n, focus);
  if (name == "recursive_halving_reducescatter") return recursiveHalvingReduceScatter(n, focus);
  if (name == "pairwise_alltoall") return pairwiseAllToAll(n, focus);
  if (name == "direct_allgather") return directAllGather(n, focus);
  if (name == "recursive_doubling_allgather") return recursiveDoublingAllGather(n, focus);
  if (name == "direct_alltoall") return directAllToAll(n, focus);
  if (name == "chain_broadcast") return chainBroadcast(n, root, focus);
  if (name == "chain_reduce") return chainReduce(n, root, focus);
  if (name == "direct_gather") return directGather(n, root, focus);
  if (name == "direct_scatter") return directScatter(n, root, focus);
  return Status(StatusCode::kNotFound, "no built-in algorithm named '" + std::string(name) + "'");
}

ir::Algorithm classicRing(CollectiveKind collective, int n, int root) {
  switch (collective) {
    case CollectiveKind::kAllGather:
      return ringAllGather(n);
    case CollectiveKind::kReduceScatter:
      return ringReduceScatter(n);
    case CollectiveKind::kBroadcast:
      return chainBroadcast(n, root);
    case CollectiveKind::kReduce:
      return chainReduce(n, root);
    case CollectiveKind::kAllToAll:
      return pairwiseAllToAll(n);
    default:
      return ringAllReduce(n);
  }
}

}  // namespace chorus::algorithms
