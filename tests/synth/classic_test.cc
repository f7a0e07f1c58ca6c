// Every built-in generator, for world sizes 1..9 (powers of two and not) and
// every root, is proven by the verifier and runs with real data in both call
// forms, with one slice per chunk and with one element per slice.
#include "synth/classic.h"

#include <gtest/gtest.h>

#include "runtime/check.h"
#include "tests/support/collective_check.h"

namespace chorus::synth {
namespace {

using chorus::testing::Case;

TEST(Classic, EveryGeneratorVerifiesAndRunsForWorldSizes1To9) {
  for (const ClassicInfo& info : classicAlgorithms()) {
    for (int n = 1; n <= 9; ++n) {
      int roots = isRooted(info.collective) ? n : 1;
      for (int root = 0; root < roots; ++root) {
        SCOPED_TRACE(info.name + " n=" + std::to_string(n) + " root=" + std::to_string(root));
        auto algo = makeClassic(info.name, n, root);
        ASSERT_TRUE(algo.isOk()) << algo.status().message();
        EXPECT_EQ(algo.value().collective, info.collective);
        auto va = runtime::VerifiedAlgorithm::make(std::move(algo).value());
        ASSERT_TRUE(va.isOk()) << va.status().message();
        if (isRooted(info.collective)) {
          EXPECT_EQ(va.value()->root(), root);
        }
        size_t unit = chorus::testing::unitCount(va.value()->algo());
        for (bool inplace : {false, true}) {
          const ir::Algorithm& a = va.value()->algo();
          if (inplace ? !a.inplace : !a.outofplace) continue;  // direct_alltoall: out of place
          for (size_t slice : {size_t{0}, size_t{4}}) {
            Case c;
            c.count = unit * 3;
            c.inplace = inplace;
            c.type = DataType::kInt32;
            c.options.sliceBytes = slice;
            c.options.order = runtime::DeterministicOptions::Order::kRandom;
            c.options.seed = static_cast<uint64_t>(n * 31 + root);
            chorus::testing::runAndCheck(*va.value(), c);
          }
        }
      }
    }
  }
}

TEST(Classic, ThreadedRunsAndFloatTypes) {
  for (const char* name : {"ring_allreduce", "halving_doubling_allreduce", "ring_reducescatter"}) {
    for (int n : {3, 4, 5, 8}) {
      SCOPED_TRACE(std::string(name) + " n=" + std::to_string(n));
      auto va = runtime::VerifiedAlgorithm::make(makeClassic(name, n).value());
      ASSERT_TRUE(va.isOk()) << va.status().message();
      for (DataType t : {DataType::kFloat32, DataType::kBfloat16, DataType::kFloat64}) {
        Case c;
        c.count = chorus::testing::unitCount(va.value()->algo()) * 5;
        c.type = t;
        c.op = ReduceOp::kAvg;
        c.threaded = true;
        c.options.sliceBytes = 8;
        c.options.slots = 2;
        chorus::testing::runAndCheck(*va.value(), c);
      }
    }
  }
}

TEST(Classic, BadArguments) {
  EXPECT_EQ(makeClassic("ring_allreduce", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(makeClassic("chain_broadcast", 4, 4).status().code(), StatusCode::kInvalidArgument);
  auto unknown = makeClassic("tree_allreduce", 4);
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("tree_allreduce"), std::string::npos);
}

}  // namespace
}  // namespace chorus::synth

namespace chorus::synth {
namespace {

// One copy per hop: every message of a ring allreduce travels by reference
// (the receiver reads the sender's buffer) except where the sender overwrites
// the chunk before its peer is proven to have read it; in place, the
// verifier's cross-rank order proves that too, so no message is copied.
TEST(Classic, RingAllReduceSendsByReference) {
  const int n = 4;
  auto va = runtime::VerifiedAlgorithm::make(ringAllReduce(n));
  ASSERT_TRUE(va.isOk());
  for (bool inplace : {false, true}) {
    auto data =
        runtime::CollectiveData::make(*va.value(), 64, DataType::kFloat32, ReduceOp::kSum, inplace);
    ASSERT_TRUE(data.isOk());
    auto pc = runtime::PreparedCall::make(*va.value(), data.value().calls());
    ASSERT_TRUE(pc.isOk());
    // Per rank: the first send, the rrcs and n-2 rcs (rrs computes into a slot).
    EXPECT_EQ(pc.value()->refSteps(), n * n) << (inplace ? "in place" : "out of place");
    ASSERT_TRUE(pc.value()->runThreaded().isOk());
    EXPECT_EQ(data.value().countWrong(), 0u);
  }
}

}  // namespace
}  // namespace chorus::synth
