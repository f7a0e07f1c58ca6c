// The step engine on several host threads at once (label `threads`, run
// under TSan): the protocols' memory ordering as C++ atomics, one slot per
// connection, repeated calls on the same connections, and a deadlock that
// is reported rather than hung.
#include <gtest/gtest.h>

#include <thread>

#include "algorithms/classic.h"
#include "runtime/exec/check.h"
#include "runtime/exec/engine_host.h"
#include "tests/support/collective_check.h"
#include "tests/support/files.h"

namespace chorus::runtime {
namespace {

using chorus::testing::Case;
using chorus::testing::load;
using chorus::testing::runAndCheck;

std::shared_ptr<const VerifiedAlgorithm> builtin(const std::string& name, int n) {
  auto a = algorithms::makeClassic(name, n, 0);
  if (!a.isOk()) return nullptr;
  auto va = VerifiedAlgorithm::make(std::move(a).value());
  return va.isOk() ? va.value() : nullptr;
}

TEST(StepEngineThreads, ProductionFilesOnFourThreadsWithOneSlot) {
  for (const char* file : {"/r48ll.xml", "/r48ll128.xml", "/ap4ll.xml", "/ag-1m.xml", "/a2a2ll.xml",
                           "/ap-1pass.xml"}) {
    SCOPED_TRACE(file);
    auto va = load(std::string(CHORUS_MSCCL_DIR) + file);
    ASSERT_TRUE(va);
    chorus::testing::runOnEngineEveryWay(*va, nullptr, /*threads=*/4, /*slots=*/1);
  }
}

// Lags (ir::Step::lag) on the step engine, the CUDA executor's step code:
// rings whose chunks lag 0, 1, 2 slices behind on every connection, and a
// production file's steps all lagged alike, each protocol, on three threads,
// one and three instances (a lag counts an instance's own slices); and on
// thread ranks. Data checked.
TEST(StepEngineThreads, LaggedStepsRunTheirSlicesLater) {
  for (int n : {3, 4, 8}) {
    SCOPED_TRACE("ring " + std::to_string(n));
    auto va = VerifiedAlgorithm::make(
        chorus::testing::lagByChunk(algorithms::ringAllReduce(n), 3, n % 2));
    ASSERT_TRUE(va.isOk()) << va.status().toString();
    for (int instances : {1, 3})
      chorus::testing::runOnEngineEveryWay(*va.value(), nullptr, /*threads=*/3, /*slots=*/2,
                                           instances);
    chorus::testing::Case c;
    c.count = chorus::testing::unitCount(va.value()->algo()) * 5;
    c.options.sliceBytes = 4;
    c.options.order = runtime::DeterministicOptions::Order::kRandom;
    chorus::testing::runAndCheck(*va.value(), c);
  }
  auto file = chorus::testing::load(std::string(CHORUS_MSCCL_DIR) + "/ap4ll.xml");
  ASSERT_TRUE(file);
  ir::Algorithm alike = file->algo();
  for (ir::Rank& r : alike.ranks)
    for (ir::Threadblock& tb : r.tbs)
      for (ir::Step& s : tb.steps) s.lag = 1;
  auto va = VerifiedAlgorithm::make(std::move(alike));
  ASSERT_TRUE(va.isOk()) << va.status().toString();
  chorus::testing::runOnEngineEveryWay(*va.value(), nullptr, /*threads=*/3, /*slots=*/2, 2);
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

// Ranks that run apart (issue 41's shape: a process per GPU): each rank's
// own PlanWorld runs only its blocks, on its own thread, its connections in
// memory the receivers allocate and the senders map after an exchange
// (conn_exchange.h). Whole algorithms and each rank's part of a built-in
// (whose connections are numbered in the part's own order), every slot
// layout, growth between calls, repeated calls; data exact.
TEST(StepEngineThreads, RanksRunApartOnExchangedConnections) {
  struct Algo {
    std::string name;
    std::shared_ptr<const VerifiedAlgorithm> va;
    bool parts;
  };
  std::vector<Algo> algos;
  for (const char* file : {"/ap4ll.xml", "/r48ll128.xml"}) {
    auto va = load(std::string(CHORUS_MSCCL_DIR) + file);
    ASSERT_TRUE(va);
    algos.push_back({file, va, false});
  }
  auto ring = builtin("ring_allreduce", 4);
  ASSERT_TRUE(ring);
  algos.push_back({"ring_allreduce parts", ring, true});
  // Parts whose largest messages differ by rank (rank 0 sends two chunks at
  // once, rank 1 never does): connections are sized per connection, and
  // all ranks still grow at the same call.
  auto folded = builtin("halving_doubling_allreduce", 3);
  ASSERT_TRUE(folded);
  algos.push_back({"halving_doubling_allreduce parts on 3", folded, true});
  for (const Algo& a : algos)
    for (int protocol : {0, 1, 2}) {
      SCOPED_TRACE(a.name + " protocol " + std::to_string(protocol));
      const int n = a.va->algo().ngpus;
      auto exchanges = inProcessExchanges(n);
      std::vector<std::shared_ptr<const VerifiedAlgorithm>> mine(static_cast<size_t>(n), a.va);
      if (a.parts)
        for (int r = 0; r < n; ++r) mine[static_cast<size_t>(r)] = a.va->part(r);
      std::vector<std::unique_ptr<PlanWorld>> worlds;
      for (int r = 0; r < n; ++r) {
        PlanRunOptions o;
        o.slots = 2;
        o.protocol = protocol;
        o.instances = 2;
        o.focus = r;
        o.exchange = exchanges[static_cast<size_t>(r)];
        auto w = PlanWorld::make(*mine[static_cast<size_t>(r)], o);
        ASSERT_TRUE(w.isOk()) << w.status().message();
        worlds.push_back(std::move(w).value());
      }
      // Larger calls after smaller ones exchange larger connections.
      for (size_t mult : {1, 5, 2, 5}) {
        auto data = CollectiveData::make(*a.va, countQuantum(a.va->algo()) * mult * 3,
                                         DataType::kFloat32, ReduceOp::kSum, a.va->algo().inplace);
        ASSERT_TRUE(data.isOk());
        std::vector<Status> got(static_cast<size_t>(n));
        std::vector<std::thread> ts;
        for (int r = 0; r < n; ++r)
          ts.emplace_back([&, r] {
            got[static_cast<size_t>(r)] = worlds[static_cast<size_t>(r)]->runRank(
                data.value().calls()[static_cast<size_t>(r)]);
          });
        for (auto& t : ts) t.join();
        for (int r = 0; r < n; ++r)
          ASSERT_TRUE(got[static_cast<size_t>(r)].isOk())
              << "rank " << r << ": " << got[static_cast<size_t>(r)].message();
        std::string first;
        EXPECT_EQ(data.value().countWrong(&first), 0u) << first;
      }
    }
}

// What a rank's world refuses: a focus without an exchange, the all-ranks
// call, and peers that disagree on the slots per connection.
TEST(StepEngineThreads, RanksApartRefuseWhatCannotMeet) {
  auto va = builtin("ring_allreduce", 2);
  ASSERT_TRUE(va);
  PlanRunOptions o;
  o.focus = 0;
  EXPECT_EQ(PlanWorld::make(*va, o).status().code(), StatusCode::kInvalidArgument);
  o.focus = 2;
  o.exchange = inProcessExchanges(2)[0];
  EXPECT_EQ(PlanWorld::make(*va, o).status().code(), StatusCode::kInvalidArgument);

  auto exchanges = inProcessExchanges(2);
  std::vector<std::unique_ptr<PlanWorld>> worlds;
  for (int r = 0; r < 2; ++r) {
    PlanRunOptions ro;
    ro.focus = r;
    ro.exchange = exchanges[static_cast<size_t>(r)];
    ro.slots = r == 0 ? 2 : 4;
    auto w = PlanWorld::make(*va, ro);
    ASSERT_TRUE(w.isOk());
    worlds.push_back(std::move(w).value());
  }
  auto data = CollectiveData::make(*va, countQuantum(va->algo()) * 4, DataType::kFloat32,
                                   ReduceOp::kSum, false);
  ASSERT_TRUE(data.isOk());
  EXPECT_EQ(worlds[0]->run(data.value().calls()).code(), StatusCode::kInvalidArgument);
  std::vector<Status> got(2);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      got[static_cast<size_t>(r)] =
          worlds[static_cast<size_t>(r)]->runRank(data.value().calls()[static_cast<size_t>(r)]);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[static_cast<size_t>(r)].code(), StatusCode::kInvalidArgument);
    EXPECT_NE(got[static_cast<size_t>(r)].message().find("slots per connection"), std::string::npos)
        << got[static_cast<size_t>(r)].message();
  }
  // Refused from then on: the peer holds half a call.
  EXPECT_EQ(worlds[0]->runRank(data.value().calls()[0]).code(), StatusCode::kInvalidArgument);

  // Ranks that split threadblocks into different numbers of instances.
  exchanges = inProcessExchanges(2);
  worlds.clear();
  for (int r = 0; r < 2; ++r) {
    PlanRunOptions ro;
    ro.focus = r;
    ro.exchange = exchanges[static_cast<size_t>(r)];
    ro.instances = r + 1;
    auto w = PlanWorld::make(*va, ro);
    ASSERT_TRUE(w.isOk());
    worlds.push_back(std::move(w).value());
  }
  ts.clear();
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      got[static_cast<size_t>(r)] =
          worlds[static_cast<size_t>(r)]->runRank(data.value().calls()[static_cast<size_t>(r)]);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(got[static_cast<size_t>(r)].message().find("instance(s)"), std::string::npos)
        << got[static_cast<size_t>(r)].message();

  // A rank whose call is refused before the exchange abandons it: its peer
  // hears so at once instead of waiting there.
  exchanges = inProcessExchanges(2, /*timeoutMs=*/600000);
  worlds.clear();
  for (int r = 0; r < 2; ++r) {
    PlanRunOptions ro;
    ro.focus = r;
    ro.exchange = exchanges[static_cast<size_t>(r)];
    auto w = PlanWorld::make(*va, ro);
    ASSERT_TRUE(w.isOk());
    worlds.push_back(std::move(w).value());
  }
  std::vector<CallArgs> bad = data.value().calls();
  bad[1].sendbuff = nullptr;
  ts.clear();
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      got[static_cast<size_t>(r)] =
          worlds[static_cast<size_t>(r)]->runRank(bad[static_cast<size_t>(r)]);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(got[1].code(), StatusCode::kInvalidArgument) << got[1].message();
  EXPECT_NE(got[0].message().find("rank 1 left the connection exchange"), std::string::npos)
      << got[0].message();
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
