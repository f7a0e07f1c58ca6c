// The step engine on several host threads at once (label `threads`, run
// under TSan): the protocols' memory ordering as C++ atomics, one slot per
// connection, repeated calls on the same connections, and a deadlock that
// is reported rather than hung.
#include <gtest/gtest.h>

#include "runtime/exec/check.h"
#include "runtime/exec/engine_host.h"
#include "tests/support/collective_check.h"
#include "tests/support/files.h"

namespace chorus::runtime {
namespace {

using chorus::testing::Case;
using chorus::testing::load;
using chorus::testing::runAndCheck;

TEST(StepEngineThreads, ProductionFilesOnFourThreadsWithOneSlot) {
  for (const char* file : {"/r48ll.xml", "/r48ll128.xml", "/ap4ll.xml", "/ag-1m.xml", "/a2a2ll.xml",
                           "/ap-1pass.xml"}) {
    SCOPED_TRACE(file);
    auto va = load(std::string(CHORUS_MSCCL_DIR) + file);
    ASSERT_TRUE(va);
    chorus::testing::runOnEngineEveryWay(*va, nullptr, /*threads=*/4, /*slots=*/1);
  }
}

// Instances on several threads: one block's instances on different threads
// share nothing but the buffers' disjoint parts (TSan checks that). Two
// slots: some files need two messages in flight per connection.
TEST(StepEngineThreads, ProductionFilesInTwoInstancesOnThreeThreads) {
  for (const auto& path : chorus::testing::productionFiles()) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    auto va = chorus::testing::load(path);
    ASSERT_TRUE(va);
    chorus::testing::runOnEngineEveryWay(*va, nullptr, /*threads=*/3, /*slots=*/2,
                                         /*instances=*/2);
  }
}

// A block run by a team of host threads, as a CUDA block's threads run it:
// each thread takes its share of every step (16-byte packs, unaligned heads
// and tails), and the barriers and votes stand for __syncthreads. Counts
// are odd multiples of the algorithm's unit, so chunks end mid-pack; TSan
// checks the team's memory ordering.
TEST(StepEngineThreads, ProductionFilesOnTeamsOfThreads) {
  for (const auto& path : chorus::testing::productionFiles()) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    auto va = chorus::testing::load(path);
    ASSERT_TRUE(va);
    for (int protocol : {0, 1, 2}) {
      SCOPED_TRACE(protocol);
      Case c;
      c.count = chorus::testing::unitCount(va->algo()) * 37;
      c.inplace = va->algo().inplace;
      c.type = DataType::kFloat16;
      c.options.slots = 2;
      // Three teams: blocks go to teams round robin, and with an odd count
      // a connection's sender and receiver are mostly in different teams
      // (two teams and an even number of blocks per rank would pair them).
      c.engineThreads = 3;
      c.team = 3;
      c.instances = 2;
      c.protocol = protocol;
      runAndCheck(*va, c);
    }
  }
}

// Every type and op of a ring allreduce on teams of 4 threads, and one on a
// warp's 32 (reduce_copy_test.cc deals packs to 32 and 256 threads).
TEST(StepEngineThreads, EveryTypeAndOpOnTeams) {
  auto va = load(std::string(CHORUS_MSCCL_DIR) + "/r48ll.xml");
  ASSERT_TRUE(va);
  for (int ti = 0; ti < kNumDataTypes; ++ti)
    for (int oi = 0; oi < kNumReduceOps; ++oi) {
      Case c;
      c.type = static_cast<DataType>(ti);
      c.op = static_cast<ReduceOp>(oi);
      SCOPED_TRACE(std::string(dataTypeName(c.type)) + " " + std::string(reduceOpName(c.op)));
      c.count = chorus::testing::unitCount(va->algo()) * 101;
      c.inplace = va->algo().inplace;
      c.engineThreads = 1;
      c.team = ti == 0 && oi == 0 ? 32 : 4;
      c.protocol = 0;
      runAndCheck(*va, c);
    }
}

TEST(StepEngineThreads, RunsRepeatedlyOnTheSameConnections) {
  auto va = load(std::string(CHORUS_MSCCL_DIR) + "/r48ll.xml");
  ASSERT_TRUE(va);
  for (int protocol : {0, 1, 2}) {  // Simple, LL, LL128
    PlanRunOptions o;
    o.threads = 3;
    o.slots = 2;
    o.protocol = protocol;
    o.sliceBytes = 8;
    auto w = PlanWorld::make(*va, o);
    ASSERT_TRUE(w.isOk());
    // Larger calls after smaller ones grow the slots; counters and LL flags
    // carry over between calls.
    for (size_t mult : {1, 3, 2, 5}) {
      auto data = CollectiveData::make(*va, countQuantum(va->algo()) * mult, DataType::kFloat32,
                                       ReduceOp::kSum, /*inplace=*/true);
      ASSERT_TRUE(data.isOk());
      for (int rep = 0; rep < 2; ++rep) {
        data.value().reset();
        ASSERT_TRUE(w.value()->run(data.value().calls()).isOk());
        std::string first;
        EXPECT_EQ(data.value().countWrong(&first), 0u) << first;
      }
    }
  }
}

TEST(StepEngineThreads, DeadlockIsReportedNotHung) {
  auto va = load(std::string(CHORUS_SOURCE_DIR) + "/tests/data/runtime_send_twice_first.xml");
  ASSERT_TRUE(va);
  std::vector<float> in0(4, 1), in1(4, 2), out0(4), out1(4);
  std::vector<CallArgs> calls = {{in0.data(), out0.data(), 2, DataType::kFloat32, ReduceOp::kSum},
                                 {in1.data(), out1.data(), 2, DataType::kFloat32, ReduceOp::kSum}};
  for (int threads : {1, 2}) {
    PlanRunOptions o;
    o.threads = threads;
    o.slots = 1;
    o.stallMs = 50;
    auto w = PlanWorld::make(*va, o);
    ASSERT_TRUE(w.isOk());
    Status st = w.value()->run(calls);
    EXPECT_EQ(st.code(), StatusCode::kDeadlock);
    EXPECT_NE(st.message().find("waiting for a free slot to rank"), std::string::npos)
        << st.message();
  }
}

}  // namespace
}  // namespace chorus::runtime
