// Which built-in serves a call (api/plan.h): the choices that depend on the
// ranks' reach — shared memory, a network, GPUs — and on size.
#include "api/plan.h"

#include <gtest/gtest.h>

#include <string>

namespace chorus::api {
namespace {

std::string chosen(CollectiveKind c, int n, size_t bytes, bool sharedMemory, bool gpu) {
  runtime::SelectionRequest req;
  req.collective = c;
  req.nranks = n;
  req.count = bytes / 4 / (c == CollectiveKind::kAllGather ? static_cast<size_t>(n) : 1);
  req.type = DataType::kFloat32;
  req.sharedMemory = sharedMemory;
  req.gpu = gpu;
  BuiltinCache builtins(n);
  auto parts = planParts(req, nullptr, builtins, nullptr);
  if (!parts.isOk()) return "error: " + parts.status().message();
  return parts.value().front().va->algo().name;
}

TEST(Plan, AllGatherGoesDirectWhereEveryMessageCostsARound) {
  constexpr auto kAg = CollectiveKind::kAllGather;
  // Shared memory: one hop per block at every size.
  EXPECT_EQ(chosen(kAg, 4, 4096, true, false), "direct_allgather");
  EXPECT_EQ(chosen(kAg, 4, 64 << 20, true, false), "direct_allgather");
  // CPU ranks across hosts: one round for small calls, the ring for large.
  EXPECT_EQ(chosen(kAg, 4, 4096, false, false), "direct_allgather");
  EXPECT_EQ(chosen(kAg, 4, 1 << 20, false, false), "direct_allgather");
  EXPECT_EQ(chosen(kAg, 4, 4 << 20, false, false), "ring_allgather");
  // GPUs keep the ring.
  EXPECT_EQ(chosen(kAg, 4, 4096, false, true), "ring_allgather");
}

}  // namespace
}  // namespace chorus::api
