// The threaded driver: the same data checks with one thread per rank, tight
// slots to exercise backpressure and wake-ups, and a deadlock that must be
// reported rather than hang. Label `threads`: run under TSan.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "algorithms/classic.h"
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

// Ranks whose calls disagree, each knowing only its own arguments (as in
// separate processes): every message's mark (transport.h) carries its
// call's signature and slices left, so the rank that receives the first
// message that shows it fails its call there, naming what differs. Rank
// 1's count makes its chunks 2 slices and a bit, rank 0's and 2's exactly
// 2: every message of rank 0's two iterations is as long as one of rank
// 1's, which sizes alone let through (rank 0 returned success with
// misaligned sums).
TEST(ThreadedExecutor, RanksWhoseCallsDisagreeFailAtTheFirstMessageThatShowsIt) {
  auto algo = algorithms::makeClassic("ring_allreduce", 3, 0);
  ASSERT_TRUE(algo.isOk());
  auto va = VerifiedAlgorithm::make(std::move(algo).value());
  ASSERT_TRUE(va.isOk());
  const VerifiedAlgorithm& ring = *va.value();
  const size_t quantum = countQuantum(ring.algo());
  constexpr size_t kSliceElems = 64;
  const size_t count = quantum * 2 * kSliceElems;  // a chunk is 2 slices
  struct Odd {
    const char* what;
    size_t oddCount;
    DataType oddType;
    const char* says;
  };
  const Odd cases[] = {
      {"count", count + quantum * 8, DataType::kFloat32, "slices of its call left"},
      {"count in the last slice", count - quantum * 8, DataType::kFloat32,
       "bytes where this step expects"},
      {"type", count, DataType::kInt32, "call is on"},
  };
  for (const Odd& c : cases) {
    SCOPED_TRACE(c.what);
    auto fabric = std::make_shared<LocalFabric>(ring.algo(), kSliceElems * 4, 2);
    std::vector<std::vector<float>> bufs(3);
    std::vector<std::unique_ptr<RankCall>> calls;
    for (int r = 0; r < 3; ++r) {
      CallArgs a;
      a.count = r == 1 ? c.oddCount : count;
      a.type = r == 1 ? c.oddType : DataType::kFloat32;
      bufs[static_cast<size_t>(r)].assign(a.count, static_cast<float>(r + 1));
      a.sendbuff = a.recvbuff = bufs[static_cast<size_t>(r)].data();
      auto rc = RankCall::make(ring, r, a, kSliceElems * 4, fabric);
      ASSERT_TRUE(rc.isOk()) << rc.status().message();
      calls.push_back(std::move(rc).value());
    }
    ASSERT_EQ(calls[0]->geometry().iterations, 2u);
    std::atomic<bool> abort{false};
    std::vector<Status> got(3);
    std::vector<std::thread> ts;
    for (int r = 0; r < 3; ++r)
      ts.emplace_back([&, r] {
        RankRunOptions o;
        o.abort = &abort;
        o.timeoutMs = 20000;
        got[static_cast<size_t>(r)] = calls[static_cast<size_t>(r)]->run(o);
        if (!got[static_cast<size_t>(r)].isOk()) abort = true;
      });
    for (auto& t : ts) t.join();
    int named = 0;
    for (int r = 0; r < 3; ++r) {
      const Status& st = got[static_cast<size_t>(r)];
      EXPECT_FALSE(st.isOk()) << "rank " << r << " returned success";
      if (st.code() == StatusCode::kInvalidArgument) {
        EXPECT_NE(st.message().find(c.says), std::string::npos) << st.message();
        ++named;
      } else {
        EXPECT_EQ(st.code(), StatusCode::kAborted) << st.message();
      }
    }
    EXPECT_GE(named, 1);
  }
}

}  // namespace
}  // namespace chorus::runtime
