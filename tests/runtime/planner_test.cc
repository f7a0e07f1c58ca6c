// Which built-in serves a call (runtime/plan/planner.h): the choices that depend on the
// ranks' reach — shared memory, a network, GPUs — and on size, each with its reason.
#include "runtime/plan/planner.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "algorithms/classic.h"

namespace chorus::runtime {
namespace {

std::string chosen(CollectiveKind c, int n, size_t bytes, bool sharedMemory, bool gpu) {
  SelectionRequest req;
  req.collective = c;
  req.nranks = n;
  // nccl-tests' size: allgather's receive and reduce-scatter's send buffer.
  const bool perRank = c == CollectiveKind::kAllGather || c == CollectiveKind::kReduceScatter;
  req.count = bytes / 4 / (perRank ? static_cast<size_t>(n) : 1);
  req.type = DataType::kFloat32;
  req.sharedMemory = sharedMemory;
  req.gpu = gpu;
  BuiltinCache builtins(n);
  AlgorithmRegistry none;
  auto parts = planParts(req, nullptr, none, builtins, nullptr);
  if (!parts.isOk()) return "error: " + parts.status().message();
  return parts.value().front().va->algo().name;
}

TEST(Plan, AllGatherGoesDirectWhereEveryMessageCostsARound) {
  constexpr auto kAg = CollectiveKind::kAllGather;
  // Shared memory: one hop per block at every size.
  EXPECT_EQ(chosen(kAg, 4, 4096, true, false), "direct_allgather");
  EXPECT_EQ(chosen(kAg, 4, 64 << 20, true, false), "direct_allgather");
  // CPU ranks across hosts: one round up to 1 MiB (below 64 KiB recursive
  // doubling: SmallAllGatherAcrossHostsDoubles), the ring for large.
  EXPECT_EQ(chosen(kAg, 2, 4096, false, false), "direct_allgather");
  EXPECT_EQ(chosen(kAg, 4, 1 << 20, false, false), "direct_allgather");
  EXPECT_EQ(chosen(kAg, 4, 4 << 20, false, false), "ring_allgather");
  // GPUs keep the ring.
  EXPECT_EQ(chosen(kAg, 4, 4096, false, true), "ring_allgather");
}

// Small allgathers across hosts swap doubling ranges (log2 n messages per
// rank); over shared memory they go direct at every size.
TEST(Plan, SmallAllGatherAcrossHostsDoubles) {
  constexpr auto kAg = CollectiveKind::kAllGather;
  EXPECT_EQ(chosen(kAg, 4, 4096, false, false), "recursive_doubling_allgather");
  EXPECT_EQ(chosen(kAg, 6, 64 << 10, false, false), "recursive_doubling_allgather");
  EXPECT_EQ(chosen(kAg, 4, 256 << 10, false, false), "direct_allgather");
  EXPECT_EQ(chosen(kAg, 2, 4096, false, false), "direct_allgather");
  EXPECT_EQ(chosen(kAg, 4, 4096, true, false), "direct_allgather");
  EXPECT_EQ(chosen(kAg, 4, 4096, false, true), "ring_allgather");
}

// Allreduce across hosts halves and doubles up to 16 MiB (fewer steps over
// the network); over shared memory and on GPUs the ring takes over above
// 64 KiB; two ranks keep recursive doubling and the ring.
TEST(Plan, AllReduceAcrossHostsHalvesAndDoubles) {
  constexpr auto kAr = CollectiveKind::kAllReduce;
  EXPECT_EQ(chosen(kAr, 4, 1 << 20, false, false), "halving_doubling_allreduce");
  EXPECT_EQ(chosen(kAr, 8, 16 << 20, false, false), "halving_doubling_allreduce");
  EXPECT_EQ(chosen(kAr, 4, 64 << 20, false, false), "ring_allreduce");
  EXPECT_EQ(chosen(kAr, 4, 1 << 20, true, false), "ring_allreduce");
  EXPECT_EQ(chosen(kAr, 4, 1 << 20, false, true), "ring_allreduce");
  EXPECT_EQ(chosen(kAr, 2, 1 << 20, false, false), "ring_allreduce");
  EXPECT_EQ(chosen(kAr, 4, 32 << 10, true, false), "halving_doubling_allreduce");
}

TEST(Plan, ReduceScatterGoesDirectOnCpuRanks) {
  constexpr auto kRs = CollectiveKind::kReduceScatter;
  EXPECT_EQ(chosen(kRs, 4, 4096, true, false), "direct_reducescatter");
  EXPECT_EQ(chosen(kRs, 8, 64 << 20, true, false), "direct_reducescatter");
  EXPECT_EQ(chosen(kRs, 4, 1 << 20, false, false), "direct_reducescatter");
  // Small ones across hosts halve: log2 n messages per rank.
  EXPECT_EQ(chosen(kRs, 4, 4096, false, false), "recursive_halving_reducescatter");
  EXPECT_EQ(chosen(kRs, 6, 64 << 10, false, false), "recursive_halving_reducescatter");
  EXPECT_EQ(chosen(kRs, 2, 4096, false, false), "direct_reducescatter");
  EXPECT_EQ(chosen(kRs, 4, 4 << 20, false, false), "ring_reducescatter");
  EXPECT_EQ(chosen(kRs, 4, 4096, true, true), "ring_reducescatter");
  EXPECT_EQ(chosen(kRs, 4, 4096, false, true), "ring_reducescatter");
}

// Every collective with a built-in ends its rules with one that always
// applies, every rule names a built-in that exists, and the reason given
// for a choice is its rule's.
TEST(Plan, EveryRuleNamesABuiltinAndSaysWhy) {
  std::set<std::string> builtins;
  for (const auto& info : algorithms::classicAlgorithms()) builtins.insert(info.name);
  // Requests of every kind the rules look at: size, rank count, in place,
  // shared memory, GPU.
  std::vector<SelectionRequest> samples;
  for (size_t count : {size_t{1}, size_t{1024}, size_t{1} << 20, size_t{1} << 28})
    for (int n : {2, 8})
      for (int flags = 0; flags < 8; ++flags) {
        SelectionRequest q;
        q.count = count;
        q.nranks = n;
        q.type = DataType::kFloat32;
        q.inplace = flags & 1;
        q.sharedMemory = flags & 2;
        q.gpu = flags & 4;
        samples.push_back(q);
      }
  std::map<CollectiveKind, bool> ends;  // the collective's last rule applies to every sample
  for (const BuiltinRule& r : builtinRules()) {
    EXPECT_EQ(builtins.count(r.builtin), 1u) << r.builtin;
    EXPECT_GT(std::string(r.why).size(), 10u) << r.builtin;
    bool all = true;
    for (SelectionRequest q : samples) {
      q.collective = r.collective;
      all = all && r.applies(q);
    }
    ends[r.collective] = all;
  }
  for (CollectiveKind c :
       {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
        CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kReduce,
        CollectiveKind::kGather, CollectiveKind::kScatter})
    EXPECT_TRUE(ends[c]) << collectiveName(c) << " has no rule that always applies";

  SelectionRequest req;
  req.collective = CollectiveKind::kAllReduce;
  req.nranks = 4;
  req.count = 1024;
  req.type = DataType::kFloat32;
  BuiltinCache cache(4);
  AlgorithmRegistry none;
  std::vector<std::string> why;
  auto parts = planParts(req, nullptr, none, cache, &why);
  ASSERT_TRUE(parts.isOk()) << parts.status().toString();
  ASSERT_FALSE(why.empty());
  EXPECT_NE(why.back().find("built-in recursive_doubling_allreduce (4096 bytes: at most 16 KiB"),
            std::string::npos)
      << why.back();
}

}  // namespace
}  // namespace chorus::runtime
