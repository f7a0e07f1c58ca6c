// The executor with the deterministic driver: every production algorithm and
// example runs with real data (values distinct per rank and chunk, exact in
// every type), for each call form it allows, with one and with many slice
// iterations, under several seeded orders; bad calls get clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/types.h"
#include "ir/xml_reader.h"
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

using Order = DeterministicOptions::Order;

TEST(Executor, ProductionFilesUnderManyOrdersAndSlices) {
  for (const auto& path : chorus::testing::productionFiles()) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    auto va = load(path);
    ASSERT_TRUE(va);
    size_t unit = unitCount(va->algo());
    const Order orders[] = {Order::kRoundRobin, Order::kReverse, Order::kRandom, Order::kRandom};
    int seed = 0;
    for (Order o : orders) {
      for (size_t sliceBytes : {size_t{4}, size_t{0}}) {  // one element per slice, or the default
        Case c;
        c.count = unit * 3;
        c.inplace = va->algo().inplace;
        c.options.order = o;
        c.options.seed = static_cast<uint64_t>(++seed);
        c.options.sliceBytes = sliceBytes;
        runAndCheck(*va, c);
      }
    }
  }
}

TEST(Executor, EveryTypeAndOpOnReduceAlgorithms) {
  std::vector<std::string> files = {
      std::string(CHORUS_MSCCL_DIR) + "/r48ll.xml", std::string(CHORUS_MSCCL_DIR) + "/ap4ll.xml",
      std::string(CHORUS_SOURCE_DIR) + "/examples/algorithms/ring_allreduce_5_outofplace.xml"};
  for (const auto& path : files) {
    auto va = load(path);
    ASSERT_TRUE(va);
    for (int t = 0; t < kNumDataTypes; ++t) {
      for (int o = 0; o < kNumReduceOps; ++o) {
        Case c;
        c.type = static_cast<DataType>(t);
        c.op = static_cast<ReduceOp>(o);
        c.count = unitCount(va->algo()) * 2;
        c.inplace = va->algo().inplace;
        c.options.order = Order::kRandom;
        c.options.seed = static_cast<uint64_t>(t * 10 + o);
        c.options.sliceBytes = dataTypeSize(c.type);
        SCOPED_TRACE(chorus::testing::baseName(path) + " " + std::string(dataTypeName(c.type)) +
                     " " + std::string(reduceOpName(c.op)));
        runAndCheck(*va, c);
      }
    }
  }
}

TEST(Executor, ExamplesInEveryTypeTheyMove) {
  for (const auto& path : chorus::testing::sourceFiles("examples/algorithms", ".xml")) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    auto va = load(path);
    ASSERT_TRUE(va);
    for (DataType t : {DataType::kInt8, DataType::kUint64, DataType::kFloat16, DataType::kFp8E5M2,
                       DataType::kFloat64}) {
      Case c;
      c.type = t;
      c.count = unitCount(va->algo()) * 5;
      c.inplace = va->algo().inplace;
      c.options.order = Order::kRandom;
      c.options.seed = 42;
      c.options.sliceBytes = 2 * dataTypeSize(t);
      runAndCheck(*va, c);
    }
  }
}

TEST(Executor, BoundedSlotsDeadlockIsReported) {
  auto va = VerifiedAlgorithm::make(chorus::testing::mustRead(
      std::string(CHORUS_SOURCE_DIR) + "/tests/data/runtime_send_twice_first.xml"));
  ASSERT_TRUE(va.isOk()) << va.status().toString();
  Case c;
  c.count = 2;
  c.options.slots = 2;
  runAndCheck(*va.value(), c);  // enough slots: correct

  std::vector<float> in0(4, 1), in1(4, 2), out0(4), out1(4);
  std::vector<CallArgs> calls = {{in0.data(), out0.data(), 2, DataType::kFloat32, ReduceOp::kSum},
                                 {in1.data(), out1.data(), 2, DataType::kFloat32, ReduceOp::kSum}};
  DeterministicOptions one;
  one.slots = 1;
  Status st = runDeterministic(*va.value(), calls, one);
  EXPECT_EQ(st.code(), StatusCode::kDeadlock);
  EXPECT_NE(
      st.message().find(
          "rank 0 tb 0 step 1 (s, iteration 0): waiting for a free slot to rank 1 on channel 0"),
      std::string::npos)
      << st.message();
}

TEST(Executor, BadCallsGetClearErrors) {
  auto va = load(std::string(CHORUS_MSCCL_DIR) + "/ap-1pass.xml");  // 8 ranks, 32 chunks, in place
  ASSERT_TRUE(va);
  std::vector<std::vector<float>> bufs(8, std::vector<float>(64, 1.0f));
  auto inPlace = [&](size_t count) {
    std::vector<CallArgs> calls;
    for (auto& b : bufs)
      calls.push_back({b.data(), b.data(), count, DataType::kFloat32, ReduceOp::kSum});
    return calls;
  };
  auto expectError = [&](std::vector<CallArgs> calls, const char* words) {
    Status st = runDeterministic(*va, calls);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << words;
    EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
  };
  EXPECT_TRUE(runDeterministic(*va, inPlace(64)).isOk());
  expectError(inPlace(33), "does not split into the 32 equal chunks");
  auto fewer = inPlace(64);
  fewer.pop_back();
  expectError(fewer, "is for 8 ranks, the call has 7");
  auto mismatch = inPlace(64);
  mismatch[3].count = 32;
  expectError(mismatch, "rank 3 calls with count 32");
  auto null = inPlace(64);
  null[5].recvbuff = nullptr;
  expectError(null, "rank 5 passes a null buffer");
  std::vector<std::vector<float>> outs(8, std::vector<float>(64));
  auto oop = inPlace(64);
  for (size_t r = 0; r < 8; ++r) oop[r].recvbuff = outs[r].data();
  expectError(oop, "does not serve out-of-place calls");
  auto overlap = inPlace(32);
  for (size_t r = 0; r < 8; ++r) overlap[r].recvbuff = bufs[r].data() + 16;
  expectError(overlap, "overlap");

  auto ag = load(std::string(CHORUS_MSCCL_DIR) + "/ag-1m.xml");
  ASSERT_TRUE(ag);
  std::vector<std::vector<float>> agBufs(8, std::vector<float>(8 * 4));
  std::vector<CallArgs> agCalls;
  for (size_t r = 0; r < 8; ++r)
    agCalls.push_back(
        {agBufs[r].data() + r * 4, agBufs[r].data(), 4, DataType::kFloat32, ReduceOp::kAvg});
  Status st = runDeterministic(*ag, agCalls);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("avg needs a reducing collective"), std::string::npos);
}

TEST(Executor, RefusesWhatTheVerifierRejectsQuotingIt) {
  ir::Algorithm bad = chorus::testing::mustRead(std::string(CHORUS_SOURCE_DIR) +
                                                "/tests/data/bad/e301_swapped_offsets.xml");
  auto va = VerifiedAlgorithm::make(bad);
  ASSERT_FALSE(va.isOk());
  EXPECT_EQ(va.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(va.status().message().find("error[E301]: rank 1"), std::string::npos)
      << va.status().message();
}

}  // namespace
}  // namespace chorus::runtime
