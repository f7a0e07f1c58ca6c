// The threaded driver: the same data checks with one thread per rank, tight
// slots to exercise backpressure and wake-ups, and a deadlock that must be
// reported rather than hang. Label `threads`: run under TSan.
#include <gtest/gtest.h>

#include "runtime/exec/check.h"
#include "runtime/exec/driver.h"
#include "tests/support/collective_check.h"
#include "tests/support/files.h"

namespace chorus::runtime {
namespace {

using chorus::testing::Case;
using chorus::testing::load;
using chorus::testing::runAndCheck;
using chorus::testing::unitCount;

TEST(ThreadedExecutor, ProductionFiles) {
  for (const auto& path : chorus::testing::productionFiles()) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    auto va = load(path);
    ASSERT_TRUE(va);
    for (size_t sliceBytes : {size_t{4}, size_t{0}}) {
      Case c;
      c.count = unitCount(va->algo()) * 3;
      c.inplace = va->algo().inplace;
      c.options.sliceBytes = sliceBytes;
      c.options.slots = 2;  // tight: exercises backpressure and wake-ups
      c.threaded = true;
      runAndCheck(*va, c);
    }
  }
}

TEST(ThreadedExecutor, TypesAndOps) {
  auto va = load(std::string(CHORUS_MSCCL_DIR) + "/r48ll.xml");
  ASSERT_TRUE(va);
  for (DataType t :
       {DataType::kFloat32, DataType::kFloat16, DataType::kInt64, DataType::kBfloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
      Case c;
      c.type = t;
      c.op = op;
      c.count = unitCount(va->algo()) * 4;
      c.inplace = true;
      c.options.sliceBytes = 2 * dataTypeSize(t);
      c.threaded = true;
      runAndCheck(*va, c);
    }
  }
}

TEST(ThreadedExecutor, PreparedCallRunsRepeatedlyWithBothDrivers) {
  auto va = load(std::string(CHORUS_MSCCL_DIR) + "/r48ll.xml");
  ASSERT_TRUE(va);
  auto data = CollectiveData::make(*va, countQuantum(va->algo()) * 5, DataType::kFloat32,
                                   ReduceOp::kSum, /*inplace=*/true);
  ASSERT_TRUE(data.isOk());
  auto pc = PreparedCall::make(*va, data.value().calls(), /*sliceBytes=*/8, /*slots=*/2);
  ASSERT_TRUE(pc.isOk()) << pc.status().toString();
  for (int i = 0; i < 6; ++i) {
    data.value().reset();  // in place: the previous result replaced the input
    DeterministicOptions o;
    o.order = DeterministicOptions::Order::kRandom;
    o.seed = static_cast<uint64_t>(i);
    Status st = i % 2 ? pc.value()->runThreaded() : pc.value()->runDeterministic(o);
    ASSERT_TRUE(st.isOk()) << st.toString();
    std::string first;
    EXPECT_EQ(data.value().countWrong(&first), 0u) << "repetition " << i << ": " << first;
  }
}

// A correct 2-rank algorithm that deadlocks with one slot per connection
// (each rank sends twice before receiving), with its buffers.
struct SendTwiceFirst {
  std::shared_ptr<const VerifiedAlgorithm> va =
      load(std::string(CHORUS_SOURCE_DIR) + "/tests/data/runtime_send_twice_first.xml");
  std::vector<float> in0 = std::vector<float>(4, 1), in1 = std::vector<float>(4, 2),
                     out0 = std::vector<float>(4), out1 = std::vector<float>(4);
  std::vector<CallArgs> calls = {{in0.data(), out0.data(), 2, DataType::kFloat32, ReduceOp::kSum},
                                 {in1.data(), out1.data(), 2, DataType::kFloat32, ReduceOp::kSum}};
};

TEST(ThreadedExecutor, PersistentThreadsSurviveADeadlockAndShutDown) {
  SendTwiceFirst t;
  ASSERT_TRUE(t.va);
  auto pc = PreparedCall::make(*t.va, t.calls, 0, /*slots=*/1);
  ASSERT_TRUE(pc.isOk());
  ThreadedOptions fast;
  fast.watchdogMs = 10;
  for (int i = 0; i < 3; ++i) {
    Status st = pc.value()->runThreaded(fast);
    EXPECT_EQ(st.code(), StatusCode::kDeadlock) << "run " << i;
  }
  // The deterministic driver on the same prepared call, after aborted runs.
  EXPECT_EQ(pc.value()->runDeterministic().code(), StatusCode::kDeadlock);
}  // PreparedCall's destructor stops and joins the parked threads

TEST(ThreadedExecutor, DeadlockIsReportedNotHung) {
  SendTwiceFirst t;
  ASSERT_TRUE(t.va);
  ThreadedOptions one;
  one.slots = 1;
  one.watchdogMs = 10;
  Status st = runThreaded(*t.va, t.calls, one);
  EXPECT_EQ(st.code(), StatusCode::kDeadlock);
  EXPECT_NE(st.message().find("waiting for a free slot to rank"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace chorus::runtime
