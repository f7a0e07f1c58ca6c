#include "runtime/plan/planner.h"

#include "algorithms/classic.h"
#include "core/check.h"

namespace chorus::runtime {
namespace {

// Largest allreduce (bytes) that runs recursive halving-doubling rather
// than the ring: below it the step count (latency) dominates.
constexpr size_t kTinyAllReduceBytes = 16 << 10;
constexpr size_t kSmallAllReduceBytes = 64 << 10;
constexpr size_t kAcrossHostsAllReduceBytes = 16 << 20;
// Allgathers and reduce-scatters this small go direct (one round) between
// CPU ranks on any transport. Allgather measured over loopback TCP, 4
// processes (2026-11-26, `chorus perf allgather --procs 4 --algo ...`):
// 4 KiB 48 vs 64 us, 64 KiB 55 vs 73 us; at 256 KiB - 16 MiB within the
// noise of each other.
constexpr size_t kSmallDirectBytes = 1 << 20;

// Allgathers and reduce-scatters this small between CPU ranks across
// hosts double or halve (log2 n messages per rank instead of n - 1).
constexpr size_t kSmallAcrossHostsBytes = 64 << 10;

bool always(const SelectionRequest&) { return true; }

bool smallAcrossHosts(const SelectionRequest& r) {
  return !r.gpu && !r.sharedMemory && r.nranks > 2 && requestBytes(r) <= kSmallAcrossHostsBytes;
}

constexpr BuiltinRule kBuiltinRules[] = {
    {CollectiveKind::kAllReduce, "recursive_doubling_allreduce",
     "at most 16 KiB: the fewest steps, latency dominates",
     [](const SelectionRequest& r) { return requestBytes(r) <= kTinyAllReduceBytes; }},
    // Across hosts (CPU ranks, not all over shared memory) up to 16 MiB
    // as well: the same bytes as the ring in 2 log n steps, not 2 (n - 1).
    // Measured over loopback TCP (2026-11-30, bench/peer_compare.sh with
    // TRANSPORT=tcp and CHORUS_PERF_FLAGS=--algo, 5 interleaved runs), 4
    // processes, halving-doubling vs ring, us: 64 KiB 118 vs 209, 1 MiB 664
    // vs 958, 4 MiB 4,277 vs 4,742, 16 MiB 16,604 vs 17,595; 8 processes
    // within the noise of each other at 1 and 16 MiB.
    {CollectiveKind::kAllReduce, "halving_doubling_allreduce",
     "at most 64 KiB on more than 2 ranks, or CPU ranks across hosts at most 16 MiB: fewer "
     "steps than the ring",
     [](const SelectionRequest& r) {
       return r.nranks > 2 &&
              (requestBytes(r) <= kSmallAllReduceBytes ||
               (!r.gpu && !r.sharedMemory && requestBytes(r) <= kAcrossHostsAllReduceBytes));
     }},
    {CollectiveKind::kAllReduce, "ring_allreduce", "larger: the ring is bandwidth-optimal", always},
    // Across hosts the small ones swap doubling ranges instead: log2 n
    // messages per rank, not n - 1. Loopback TCP, 4 processes, us per call
    // (2026-11-30, bench/peer_compare.sh with TRANSPORT=tcp and
    // CHORUS_PERF_FLAGS=--algo, three runs of 3-5 interleaved repetitions):
    // 4 KiB 35 / 50 / 51 against direct 68 / 63 / 69; 64 KiB 55 / 40 / 64
    // against 75 / 76 / 53; at 1 MiB alike (396 vs 405).
    {CollectiveKind::kAllGather, "recursive_doubling_allgather",
     "CPU ranks across hosts, at most 64 KiB: log2 n messages per rank", smallAcrossHosts},
    {CollectiveKind::kAllGather, "direct_allgather",
     "shared memory (one hop per block), or CPU ranks at most 1 MiB (one round)",
     [](const SelectionRequest& r) {
       return r.sharedMemory || (!r.gpu && requestBytes(r) <= kSmallDirectBytes);
     }},
    // GPU worlds keep the ring: the direct exchange's (n-1) blocks per rank
    // are unmeasured on a GPU, where every block must be resident at once.
    {CollectiveKind::kAllGather, "ring_allgather", "GPUs, or larger calls across hosts: the ring",
     always},
    // Across hosts the small ones halve instead (as allgather doubles):
    // loopback TCP, 4 processes, us per call (2026-11-30, the same bench):
    // 4 KiB 35 against direct 62, 64 KiB 59 against 77; direct ahead again
    // at 1 MiB (337 vs 390).
    {CollectiveKind::kReduceScatter, "recursive_halving_reducescatter",
     "CPU ranks across hosts, at most 64 KiB: log2 n messages per rank", smallAcrossHosts},
    // Measured on 2, 4 and 8 processes, 4 KiB - 16 MiB (2026-11-30,
    // bench/peer_compare.sh with CHORUS_PERF_FLAGS=--algo): over shared
    // memory the direct form is as fast or faster at every size (8
    // processes: 4 KiB 20 vs 31 us, 1 MiB 115 vs 352 us, 16 MiB 4.6 vs 6.6
    // ms); over loopback TCP, 4 processes, too (4 KiB 48 vs 65 us, 16 MiB
    // 10.8 vs 11.3 ms), but across real hosts every rank's n - 1 messages
    // meet at each receiver at once: the ring for larger calls there, as
    // for allgather.
    {CollectiveKind::kReduceScatter, "direct_reducescatter",
     "CPU ranks over shared memory, or at most 1 MiB across hosts: one round",
     [](const SelectionRequest& r) {
       return !r.gpu && (r.sharedMemory || requestBytes(r) <= kSmallDirectBytes);
     }},
    {CollectiveKind::kReduceScatter, "ring_reducescatter",
     "GPUs, or larger calls across hosts: the ring", always},
    // In place needs scratch to hold what arrives before its block has left.
    {CollectiveKind::kAllToAll, "pairwise_alltoall",
     "in place: rounds free each block before it is overwritten",
     [](const SelectionRequest& r) { return r.inplace; }},
    {CollectiveKind::kAllToAll, "direct_alltoall", "out of place: every block one hop", always},
    {CollectiveKind::kBroadcast, "chain_broadcast", "a pipelined chain from the root", always},
    {CollectiveKind::kReduce, "chain_reduce", "a pipelined chain to the root", always},
    {CollectiveKind::kGather, "direct_gather", "straight to the root", always},
    {CollectiveKind::kScatter, "direct_scatter", "straight from the root", always},
};

}  // namespace

std::span<const BuiltinRule> builtinRules() { return kBuiltinRules; }

const char* const kBuiltinFamilyBasis =
    "the built-in's family, verified at 1-9, 12, 16, 31-33, 64, 100 and 128 ranks, and each rank's "
    "part equal to its whole at 1-64 (tests/algorithms/classic_test.cc)";

Result<std::shared_ptr<const VerifiedAlgorithm>> BuiltinCache::get(const std::string& name,
                                                                   int root) {
  auto key = std::make_pair(name, root);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::shared_ptr<const VerifiedAlgorithm> made;
  if (focus_ >= 0 && n_ > proveUpTo_) {
    auto part = algorithms::makeClassic(name, n_, std::max(root, 0), focus_);
    if (!part.isOk()) return part.status();
    made = VerifiedAlgorithm::fromFamily(std::move(part).value(), focus_, std::max(root, 0),
                                         kBuiltinFamilyBasis);
  } else {
    auto algo = algorithms::makeClassic(name, n_, std::max(root, 0));
    if (!algo.isOk()) return algo.status();
    auto va = VerifiedAlgorithm::make(std::move(algo).value());
    CHORUS_CHECK(va.isOk(), "a built-in algorithm fails verification");
    made = focus_ >= 0 ? va.value()->part(focus_) : va.value();
  }
  cache_[key] = made;
  return made;
}

Result<std::vector<PlanPart>> planParts(SelectionRequest req,
                                        const std::shared_ptr<const VerifiedAlgorithm>& algo,
                                        const AlgorithmRegistry& registry, BuiltinCache& builtins,
                                        std::vector<std::string>* why) {
  if (isRooted(req.collective) && (req.root < 0 || req.root >= req.nranks))
    return Status(StatusCode::kInvalidArgument,
                  "root " + std::to_string(req.root) + " is not a rank of this " +
                      std::to_string(req.nranks) + "-rank communicator");
  std::shared_ptr<const VerifiedAlgorithm> va = algo;
  if (va != nullptr) {
    req.collective = va->algo().collective;
    std::string no = ineligibility(*va, req, /*sizeRange=*/false);
    if (!no.empty())
      return Status(StatusCode::kInvalidArgument,
                    "algorithm '" + va->algo().name + "' cannot run this call: " + no);
    if (why) why->push_back("explicit algorithm '" + va->algo().name + "'");
    return std::vector<PlanPart>{{va, 0, req.count}};
  }
  auto selected = registry.select(req, why);
  if (!selected.isOk()) return selected.status();
  va = selected.value();
  if (va != nullptr) return std::vector<PlanPart>{{va, 0, req.count}};

  const BuiltinRule* rule = nullptr;
  for (const BuiltinRule& r : builtinRules())
    if (r.collective == req.collective && r.applies(req)) {
      rule = &r;
      break;
    }
  if (rule == nullptr)
    return Status(StatusCode::kUnsupported,
                  "no built-in algorithm for " + std::string(collectiveName(req.collective)));
  const std::string name = rule->builtin;
  auto b = builtins.get(name, req.root);
  if (!b.isOk()) return b.status();
  // A count the chunks do not divide: the divisible prefix runs on the
  // chosen algorithm, the rest on the one-chunk chain.
  size_t tail = req.count % countQuantum(b.value()->algo());
  if (why) {
    const VerifiedAlgorithm& v = *b.value();
    std::string part = v.partRank() < 0 ? ""
                       : v.basis().empty()
                           ? ", rank " + std::to_string(v.partRank()) + "'s part, verified whole"
                           : ", rank " + std::to_string(v.partRank()) +
                                 "'s part, not verified whole at " + std::to_string(req.nranks) +
                                 " ranks: it rests on " + v.basis();
    why->push_back("built-in " + name + " (" + std::to_string(requestBytes(req)) +
                   " bytes: " + rule->why + ")" + part +
                   (tail ? ", last " + std::to_string(tail) + " elements on chain_allreduce" : ""));
  }
  const int protocol = req.gpu && req.gpuLLBytes > 0 && requestBytes(req) <= req.gpuLLBytes
                           ? static_cast<int>(ir::Protocol::kLL)
                           : -1;
  if (why && protocol >= 0)
    why->push_back("on LL slots (GPU, at most " + std::to_string(req.gpuLLBytes) + " bytes)");
  std::vector<PlanPart> parts;
  size_t main = req.count - tail;
  if (main > 0 || tail == 0) parts.push_back({b.value(), 0, main, protocol});
  if (tail > 0) {
    auto chain = builtins.get("chain_allreduce", -1);
    if (!chain.isOk()) return chain.status();
    parts.push_back({chain.value(), main, tail, protocol});
  }
  return parts;
}

CallArgs partArgs(const CallArgs& c, const PlanPart& p) {
  CallArgs out = c;
  size_t skip = p.offset * dataTypeSize(c.type);
  out.sendbuff = static_cast<const unsigned char*>(c.sendbuff) + skip;
  out.recvbuff = static_cast<unsigned char*>(c.recvbuff) + skip;
  out.count = p.count;
  return out;
}

}  // namespace chorus::runtime
