// The simulator against closed forms (within 1 %), the topology model and
// its formats, and the runtime's step semantics.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chorus/lang.hpp>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "algorithms/classic.h"
#include "compiler/compiler.h"
#include "ir/xml_reader.h"
#include "runtime/exec/check.h"
#include "runtime/exec/driver.h"
#include "sim/simulator.h"
#include "tests/support/collective_check.h"
#include "tests/support/files.h"
#include "topo/json.h"
#include "topo/nccl_xml.h"
#include "topo/presets.h"

namespace chorus {
namespace {

constexpr double kGB = 1e9;

sim::Result mustSimulate(const ir::Algorithm& a, const topo::Topology& t, sim::Options o) {
  auto r = sim::simulate(a, t, o);
  EXPECT_TRUE(r.isOk()) << r.status().toString();
  return r.isOk() ? r.value() : sim::Result{};
}

topo::Topology preset(const std::string& name) {
  auto t = topo::makePreset(name);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? t.value() : topo::Topology{};
}

// One slice per chunk moved whole (store and forward), no protocol
// latency: the closed forms' model.
sim::Options plain(size_t bytes) {
  sim::Options o;
  o.bytes = bytes;
  o.sliceBytes = size_t{1} << 40;
  o.partsPerSlice = 1;
  o.stepLatency = 0;
  return o;
}

// Ring allreduce on an n-ring of bandwidth B and link latency a:
// 2(n-1) a + 2(n-1)/n M/B; ring allgather: (n-1) a + (n-1)/n M/B.
TEST(Sim, RingsMatchTheirClosedForms) {
  for (int n : {2, 3, 4, 8, 16})
    for (double bw : {25.0, 100.0})
      for (size_t bytes : {size_t{1} << 16, size_t{1} << 24}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " bw=" + std::to_string(bw) +
                     " bytes=" + std::to_string(bytes));
        topo::Topology ring = preset("ring:" + std::to_string(n) + ":" + std::to_string(bw));
        const double a = 1e-6, m = static_cast<double>(bytes), b = bw * kGB;
        sim::Result r = mustSimulate(algorithms::ringAllReduce(n), ring, plain(bytes));
        double want = 2 * (n - 1) * a + 2.0 * (n - 1) / n * m / b;
        EXPECT_NEAR(r.time, want, want * 0.01);
        sim::Result g = mustSimulate(algorithms::ringAllGather(n), ring, plain(bytes));
        want = (n - 1) * a + (n - 1.0) / n * m / b;
        EXPECT_NEAR(g.time, want, want * 0.01);
        // busbw of a ring on a ring is the link's bandwidth, less latency.
        EXPECT_LT(r.busbw, bw);
      }
}

// At scale (docs/scale.md): a 1024-rank ring allreduce (2,095,104 steps) on
// a 1024-ring still meets its closed form within 1 %.
TEST(Sim, RingAtScaleMatchesItsClosedForm) {
  const int n = 1024;
  topo::Topology ring = preset("ring:" + std::to_string(n));
  const double a = 1e-6, m = double{1 << 30}, b = 25 * kGB;
  sim::Result r = mustSimulate(algorithms::ringAllReduce(n), ring, plain(size_t{1} << 30));
  const double want = 2 * (n - 1) * a + 2.0 * (n - 1) / n * m / b;
  EXPECT_NEAR(r.time, want, want * 0.01);
}

// A chain broadcast over n ranks pipelines: a unit (a slice, or a part
// of one) reaches the end after (n-1)(a + U/B), the rest follow every U/B.
// Latency is paid once per hop, not once per slice (a sender moves on when
// its bytes have left), and a rank forwards a slice part by part.
TEST(Sim, ChainsPipelineSlicesAndParts) {
  const int n = 4;
  const double a = 1e-6, b = 25 * kGB;
  topo::Topology ring = preset("ring:" + std::to_string(n) + ":25");
  const size_t bytes = size_t{8} << 20;
  auto want = [&](double unit, double units) {
    return (n - 1) * (a + unit / b) + (units - 1) * unit / b;
  };
  sim::Options slices = plain(bytes);
  slices.sliceBytes = size_t{1} << 20;  // 8 slices, whole
  sim::Result r = mustSimulate(algorithms::chainBroadcast(n, 0), ring, slices);
  EXPECT_EQ(r.iterations, 8u);
  EXPECT_NEAR(r.time, want(1 << 20, 8), want(1 << 20, 8) * 1e-6);
  sim::Options parts = plain(bytes);  // 1 slice of 8 MiB, in 4 parts
  parts.partsPerSlice = 4;
  r = mustSimulate(algorithms::chainBroadcast(n, 0), ring, parts);
  EXPECT_EQ(r.iterations, 1u);
  EXPECT_NEAR(r.time, want(2 << 20, 4), want(2 << 20, 4) * 1e-6);
  // Store and forward, as the closed forms above: (n-1)(a + M/B).
  r = mustSimulate(algorithms::chainBroadcast(n, 0), ring, plain(bytes));
  EXPECT_NEAR(r.time, want(8 << 20, 1), want(8 << 20, 1) * 1e-6);
}

// An algorithm made for slices of its own (ir::Algorithm::sliceBytes):
// the simulator and the runtimes cut them where not told another, so a
// chain pipelines by them as by Options::sliceBytes; the runtime moves the
// data right slice by slice, in the order the simulator found.
// The timers (a message's arrival after its route's latency) come due in
// order however many latencies there are: a chain over 24 ranks whose hops
// each have a latency of their own (more than the simulator's lanes, one
// per delay, so some share its heap) still pipelines as the closed form
// says, with each hop's own latency in place of one for all.
TEST(Sim, TimersComeDueInOrderWithManyLatencies) {
  const int n = 24;
  const double b = 25 * kGB;
  topo::Topology ring = preset("ring:" + std::to_string(n) + ":25");
  for (size_t l = 0; l < ring.links.size(); ++l)
    ring.links[l].latency = (1 + 0.37 * static_cast<double>(l)) * 1e-6;
  const ir::Algorithm chain = algorithms::chainBroadcast(n, 0);
  double latencies = 0;  // along the chain
  for (int r = 0, hops = 0; hops < n - 1; ++hops) {
    int next = -1;
    for (const ir::Threadblock& tb : chain.ranks[static_cast<size_t>(r)].tbs)
      if (tb.sendPeer >= 0) next = tb.sendPeer;
    ASSERT_GE(next, 0);
    for (int l : ring.route(r, next)) latencies += ring.links[static_cast<size_t>(l)].latency;
    r = next;
  }
  sim::Options slices = plain(size_t{8} << 20);
  slices.sliceBytes = size_t{1} << 20;  // 8 slices, whole
  const sim::Result r = mustSimulate(chain, ring, slices);
  const double unit = 1 << 20;
  const double want = latencies + (n - 1) * unit / b + 7 * unit / b;
  EXPECT_NEAR(r.time, want, want * 1e-9);
}

TEST(Sim, AnAlgorithmsOwnSliceIsWhatItRunsBy) {
  const int n = 4;
  const double a = 1e-6, b = 25 * kGB;
  topo::Topology ring = preset("ring:" + std::to_string(n) + ":25");
  const size_t bytes = size_t{8} << 20;
  ir::Algorithm chain = algorithms::chainBroadcast(n, 0);
  chain.sliceBytes = size_t{1} << 20;
  sim::Options own = plain(bytes);
  own.sliceBytes = 0;  // not told one: the algorithm's
  sim::Result r = mustSimulate(chain, ring, own);
  EXPECT_EQ(r.iterations, 8u);
  const double want = (n - 1) * (a + (1 << 20) / b) + 7 * (1 << 20) / b;
  EXPECT_NEAR(r.time, want, want * 1e-6);
  sim::Options told = plain(bytes);
  told.sliceBytes = size_t{2} << 20;  // told another: that one
  EXPECT_EQ(mustSimulate(chain, ring, told).iterations, 4u);

  chain.sliceBytes = 1024;  // 3 KiB per chunk: three slices
  auto va = runtime::VerifiedAlgorithm::make(chain);
  ASSERT_TRUE(va.isOk()) << va.status().toString();
  sim::Options o;
  o.bytes = size_t{3} << 10;
  o.recordOrder = true;
  o.criticalPath = false;
  const sim::Result order = mustSimulate(chain, ring, o);
  ASSERT_EQ(order.iterations, 3u);
  auto data = runtime::CollectiveData::make(*va.value(), order.count, DataType::kFloat32,
                                            ReduceOp::kSum, false);
  ASSERT_TRUE(data.isOk()) << data.status().toString();
  auto plan = runtime::planCall(*va.value(), data.value().calls(), 0);
  ASSERT_TRUE(plan.isOk()) << plan.status().toString();
  EXPECT_EQ(plan.value().iterations, 3u);
  auto call = runtime::PreparedCall::make(*va.value(), data.value().calls(), 0, 8);
  ASSERT_TRUE(call.isOk()) << call.status().toString();
  ASSERT_TRUE(call.value()->runInOrder(order.order).isOk());
  std::string first;
  EXPECT_EQ(data.value().countWrong(&first), 0u) << first;
  // And run freely on threads.
  data.value().reset();
  runtime::DeterministicOptions d;
  ASSERT_TRUE(runtime::runDeterministic(*va.value(), data.value().calls(), d).isOk());
  EXPECT_EQ(data.value().countWrong(&first), 0u) << first;
}

// Lags (ir::Step::lag): a ring allreduce whose chunk c's steps lag c % 3
// slices, so each connection runs three chunks' slices apart, proves and
// runs, on thread ranks in the order the simulator found and freely, with
// its data checked. Every step lagged alike only adds iterations that move
// nothing: the simulated time is the same to the bit.
TEST(Sim, LaggedStepsMoveTheirSlicesLater) {
  const int n = 4;
  topo::Topology ring = preset("ring:4:25");
  ir::Algorithm plainRing = algorithms::ringAllReduce(n);
  plainRing.sliceBytes = 1024;
  sim::Options o;
  o.bytes = size_t{12} << 10;  // 3 KiB chunks: three slices
  o.criticalPath = false;
  const sim::Result plainRun = mustSimulate(plainRing, ring, o);
  ASSERT_EQ(plainRun.iterations, 3u);
  ir::Algorithm alike = plainRing;
  for (ir::Rank& r : alike.ranks)
    for (ir::Threadblock& tb : r.tbs)
      for (ir::Step& s : tb.steps) s.lag = 2;
  const sim::Result alikeRun = mustSimulate(alike, ring, o);
  EXPECT_EQ(alikeRun.iterations, 3u);
  EXPECT_EQ(alikeRun.time, plainRun.time);

  const ir::Algorithm lagged = testing::lagByChunk(plainRing, 3);
  auto va = runtime::VerifiedAlgorithm::make(lagged);
  ASSERT_TRUE(va.isOk()) << va.status().toString();
  o.recordOrder = true;
  const sim::Result order = mustSimulate(lagged, ring, o);
  EXPECT_GT(order.time, 0);
  // Each threadblock ran its steps 3 + 2 times (the largest lag's two).
  EXPECT_EQ(order.order.size(), 5 * lagged.totalSteps());
  auto data = runtime::CollectiveData::make(*va.value(), order.count, DataType::kFloat32,
                                            ReduceOp::kSum, false);
  ASSERT_TRUE(data.isOk()) << data.status().toString();
  auto call = runtime::PreparedCall::make(*va.value(), data.value().calls(), 0, 8);
  ASSERT_TRUE(call.isOk()) << call.status().toString();
  ASSERT_TRUE(call.value()->runInOrder(order.order).isOk());
  std::string first;
  EXPECT_EQ(data.value().countWrong(&first), 0u) << first;
  for (auto how : {runtime::DeterministicOptions::Order::kRoundRobin,
                   runtime::DeterministicOptions::Order::kRandom}) {
    data.value().reset();
    runtime::DeterministicOptions d;
    d.order = how;
    d.seed = 5;
    ASSERT_TRUE(runtime::runDeterministic(*va.value(), data.value().calls(), d).isOk());
    EXPECT_EQ(data.value().countWrong(&first), 0u) << first;
  }
}

// Instances (sim::Options::instances, as the CUDA executor runs them):
// each runs every K-th slice over connections of its own, so the same
// bytes cross the same links. On a chain, K instances of slices cut to a
// K-th, sharing each link, pipeline exactly as one instance of the whole
// slices: (n-1)(a + U/B) + (units-1) U/B again. The model has links and a
// rank's memory bandwidth (shared by its instances), no per-threadblock
// limit: instances leave a prediction bound by either unchanged.
TEST(Sim, InstancesShareTheLinksAndTheMemory) {
  const int n = 4;
  const double a = 1e-6, b = 25 * kGB;
  topo::Topology ring = preset("ring:" + std::to_string(n) + ":25");
  sim::Options o = plain(size_t{8} << 20);
  o.sliceBytes = size_t{1} << 20;
  sim::Result one = mustSimulate(algorithms::chainBroadcast(n, 0), ring, o);
  o.instances = 2;
  sim::Result two = mustSimulate(algorithms::chainBroadcast(n, 0), ring, o);
  EXPECT_EQ(two.iterations, 16u);  // slices of 512 KiB, 8 per instance
  const double want = (n - 1) * (a + (1 << 20) / b) + 7 * (1 << 20) / b;
  EXPECT_NEAR(two.time, want, want * 1e-6);
  EXPECT_EQ(two.linkBytes, one.linkBytes);

  // A ring allreduce on a ring of links, and on one GPU where a step's
  // reduction also costs memory time: the same time at every K.
  for (const char* where : {"ring:8", "gpu:8"}) {
    topo::Topology t = preset(where);
    for (int k : {2, 4, 16}) {
      SCOPED_TRACE(std::string(where) + " instances " + std::to_string(k));
      sim::Options d;
      d.bytes = size_t{4} << 20;
      sim::Result base = mustSimulate(algorithms::ringAllReduce(8), t, d);
      d.instances = k;
      sim::Result split = mustSimulate(algorithms::ringAllReduce(8), t, d);
      EXPECT_NEAR(split.time, base.time, base.time * 1e-6);
      ASSERT_EQ(split.linkBytes.size(), base.linkBytes.size());
      for (size_t l = 0; l < base.linkBytes.size(); ++l)
        EXPECT_NEAR(split.linkBytes[l], base.linkBytes[l], base.linkBytes[l] * 1e-12);
    }
  }
  // Every production file in 3 instances: no deadlock, the same bytes.
  topo::Topology ndv4 = preset("ndv4");
  for (const std::string& f : testing::productionFiles()) {
    ir::Algorithm alg = testing::mustRead(f);
    sim::Options p;
    p.bytes = size_t{4} << 20;
    p.inplace = !alg.outofplace;
    p.criticalPath = false;
    sim::Result base = mustSimulate(alg, ndv4, p);
    p.instances = 3;
    auto split = sim::simulate(alg, ndv4, p);
    ASSERT_TRUE(split.isOk()) << f << ": " << split.status().toString();
    for (size_t l = 0; l < base.linkBytes.size(); ++l)
      EXPECT_NEAR(split.value().linkBytes[l], base.linkBytes[l], base.linkBytes[l] * 1e-9) << f;
  }
  o.instances = 65;
  EXPECT_EQ(sim::simulate(algorithms::chainBroadcast(n, 0), ring, o).status().code(),
            StatusCode::kInvalidArgument);
}

// Step times (what the report draws): one per step of the first slice
// iteration, in the algorithm's order; a step that waited for its
// message names the peer's send; along a chain stored and forwarded, rank
// k's message arrives k hops of a + M/B in.
TEST(Sim, StepTimesSayWhenEachStepRanAndWhatItWaitedFor) {
  const int n = 4;
  const double a = 1e-6, b = 25 * kGB;
  topo::Topology ring = preset("ring:" + std::to_string(n) + ":25");
  const size_t bytes = size_t{1} << 20;
  ir::Algorithm chain = algorithms::chainBroadcast(n, 0);
  sim::Options o = plain(bytes);
  o.stepTimes = true;
  sim::Result r = mustSimulate(chain, ring, o);
  ASSERT_EQ(r.steps.size(), chain.totalSteps());
  size_t i = 0;
  double last = 0;
  for (const ir::Rank& rank : chain.ranks)
    for (const ir::Threadblock& tb : rank.tbs)
      for (size_t k = 0; k < tb.steps.size(); ++k, ++i) {
        const sim::PathStep& p = r.steps[i];
        SCOPED_TRACE(describeSite(p.rank, p.tb, p.step));
        EXPECT_EQ(p.rank, rank.id);
        EXPECT_EQ(p.tb, tb.id);
        EXPECT_EQ(p.step, static_cast<int>(k));
        EXPECT_EQ(p.iteration, 0);
        EXPECT_LE(p.start, p.end);
        last = std::max(last, p.end);
        if (std::string(p.waited) == "data") {
          EXPECT_EQ(p.byRank, tb.recvPeer);
          EXPECT_EQ(p.byIteration, 0);
        }
        if (ir::receives(tb.steps[k].type)) {
          // Its message arrives; a forwarding step ends when its own
          // bytes have left too.
          const double hop = a + static_cast<double>(bytes) / b;
          const double own = ir::sends(tb.steps[k].type) ? static_cast<double>(bytes) / b : 0;
          EXPECT_STREQ(p.waited, "data");
          EXPECT_NEAR(p.end, rank.id * hop + own, 1e-9);
        }
      }
  EXPECT_DOUBLE_EQ(last, r.time);
  o.stepTimes = false;
  EXPECT_TRUE(mustSimulate(chain, ring, o).steps.empty());
}

// The timeline accounts for every byte a link carries, never more than
// its bandwidth allows per bucket, and puts it when it moved: a chain
// broadcast stored and forwarded crosses its links one after another.
TEST(Sim, TimelineShowsWhenEachLinkWasBusy) {
  const int n = 4;
  topo::Topology ring = preset("ring:" + std::to_string(n) + ":25");
  sim::Options o = plain(size_t{8} << 20);
  sim::Result whole = mustSimulate(algorithms::chainBroadcast(n, 0), ring, o);
  o.timelineStep = whole.time / (n - 1);  // one hop each
  sim::Result r = mustSimulate(algorithms::chainBroadcast(n, 0), ring, o);
  EXPECT_DOUBLE_EQ(r.time, whole.time);
  ASSERT_EQ(r.timeline.size(), ring.links.size());
  int hops = 0;
  for (size_t l = 0; l < ring.links.size(); ++l) {
    SCOPED_TRACE("link " + std::to_string(l));
    double sum = 0;
    for (double b : r.timeline[l]) {
      EXPECT_LE(b, ring.links[l].bandwidth * kGB * o.timelineStep * (1 + 1e-9));
      sum += b;
    }
    EXPECT_NEAR(sum, r.linkBytes[l], 1e-6 * (1 + r.linkBytes[l]));
    // The hop from rank h to h + 1 is the h-th third of the run.
    const topo::Link& link = ring.links[l];
    for (int h = 0; h + 1 < n; ++h)
      if (link.from == ring.nodeOfRank(h) && link.to == ring.nodeOfRank(h + 1)) {
        ASSERT_GT(r.timeline[l].size(), static_cast<size_t>(h));
        EXPECT_NEAR(r.timeline[l][static_cast<size_t>(h)], 8 << 20, 1.0);
        ++hops;
      }
  }
  EXPECT_EQ(hops, n - 1);
  o.timelineStep = -1;
  EXPECT_FALSE(sim::simulate(algorithms::chainBroadcast(n, 0), ring, o).isOk());
}

// All-pairs alltoall on a fully connected graph: every block crosses its
// own link at once: a + (M/n)/B.
TEST(Sim, AllPairsOnFullyConnected) {
  for (int n : {3, 4, 8}) {
    topo::Topology full = preset("full:" + std::to_string(n));
    size_t bytes = size_t{1} << 22;
    sim::Result r = mustSimulate(algorithms::pairwiseAllToAll(n), full, plain(bytes));
    double want = 1e-6 + static_cast<double>(bytes) / n / (25 * kGB);
    EXPECT_NEAR(r.time, want, want * 0.01) << n;
  }
}

// A rank's receive cap binds like a link: on a fully connected graph the
// all-pairs alltoall's n - 1 flows into rank 0 share its cap; a send cap
// on rank 1 splits its flows out the same way.
TEST(Sim, SendAndReceiveCapsBoundARank) {
  const int n = 4;
  size_t bytes = size_t{1} << 22;
  double block = static_cast<double>(bytes) / n;
  for (bool send : {false, true}) {
    topo::Topology full = preset("full:" + std::to_string(n));
    topo::Node& capped = full.nodes[static_cast<size_t>(full.nodeOfRank(send ? 1 : 0))];
    (send ? capped.sendCap : capped.recvCap) = 30;  // GB/s, below 3 x 25
    ASSERT_TRUE(full.validate().isOk());
    sim::Result r = mustSimulate(algorithms::pairwiseAllToAll(n), full, plain(bytes));
    double want = 1e-6 + (n - 1) * block / (30 * kGB);
    EXPECT_NEAR(r.time, want, want * 0.01) << (send ? "send" : "receive");
  }
  topo::Topology bad = preset("full:2");
  bad.nodes[0].recvCap = -1;
  EXPECT_FALSE(bad.validate().isOk());
}

// linkBound: a ring allreduce on a ring puts 2(n-1)/n of the call on every
// link, so no run of it beats n B / 2(n-1); LL's 16 wire bytes for 8 halve
// that, and a rank's send cap binds like a link. Every production file and
// every built-in simulates at most at its bound (on NDv4 and a torus,
// where routes share links), and the ring comes close to it.
TEST(Sim, LinkBoundIsTheBusiestLinksTime) {
  const int n = 8;
  const double bw = 25;
  topo::Topology ring = preset("ring:" + std::to_string(n) + ":" + std::to_string(bw));
  sim::Options o = plain(size_t{1} << 26);
  auto bound = sim::linkBound(algorithms::ringAllReduce(n), ring, o);
  ASSERT_TRUE(bound.isOk()) << bound.status().toString();
  const double want = n * bw / (2.0 * (n - 1));
  EXPECT_NEAR(bound.value(), want, want * 1e-12);
  const sim::Result r = mustSimulate(algorithms::ringAllReduce(n), ring, o);
  EXPECT_LE(r.algbw, bound.value());
  EXPECT_GT(r.algbw, 0.99 * bound.value());
  o.protocol = static_cast<int>(ir::Protocol::kLL);
  EXPECT_NEAR(sim::linkBound(algorithms::ringAllReduce(n), ring, o).value(), want / 2,
              want * 1e-12);
  // Rank 3's sends capped at 10 GB/s: its link carries the same bytes at
  // that rate.
  topo::Topology capped = ring;
  capped.nodes[static_cast<size_t>(capped.nodeOfRank(3))].sendCap = 10;
  ASSERT_TRUE(capped.validate().isOk());
  EXPECT_NEAR(sim::linkBound(algorithms::ringAllReduce(n), capped, plain(size_t{1} << 26)).value(),
              want * 10 / bw, want * 1e-12);
  // A schedule that moves nothing over a link: no bound.
  EXPECT_TRUE(std::isinf(
      sim::linkBound(algorithms::ringAllReduce(1), preset("ring:2"), plain(size_t{1} << 20))
          .value()));
  for (const auto& [topoName, files] :
       {std::pair{std::string("ndv4"), testing::productionFiles()},
        std::pair{std::string("torus:4:2"), std::vector<std::string>{}}}) {
    topo::Topology t = preset(topoName);
    std::vector<ir::Algorithm> algos;
    for (const std::string& f : files) algos.push_back(testing::mustRead(f));
    for (const auto& info : algorithms::classicAlgorithms()) {
      auto a = algorithms::makeClassic(info.name, t.ranks());
      if (a.isOk()) algos.push_back(std::move(a).value());
    }
    for (const ir::Algorithm& a : algos) {
      sim::Options big;
      big.bytes = size_t{64} << 20;
      big.inplace = !a.outofplace;
      big.criticalPath = false;
      auto limit = sim::linkBound(a, t, big);
      ASSERT_TRUE(limit.isOk()) << a.name << ": " << limit.status().toString();
      auto sim = sim::simulate(a, t, big);
      ASSERT_TRUE(sim.isOk()) << a.name << ": " << sim.status().toString();
      EXPECT_LE(sim.value().algbw, limit.value()) << a.name << " on " << topoName;
    }
  }
  // simulate()'s errors: too many ranks, too small a call, no route.
  EXPECT_FALSE(sim::linkBound(algorithms::ringAllReduce(8), preset("ring:4"), o).isOk());
  sim::Options tiny;
  tiny.bytes = 4;
  EXPECT_FALSE(sim::linkBound(algorithms::ringAllReduce(4), preset("ring:4"), tiny).isOk());
  topo::Topology split;
  split.addRank();
  split.addRank();
  auto r2 = sim::linkBound(algorithms::ringAllReduce(2), split, sim::Options{});
  ASSERT_FALSE(r2.isOk());
  EXPECT_NE(r2.status().message().find("cannot reach"), std::string::npos);
}

// fastestByBound finds what simulating every candidate finds, simulating
// fewer: the built-ins of each collective on a 4 x 4 torus and on NDv4.
TEST(Sim, FastestByBoundFindsTheFastest) {
  size_t simulated = 0, all = 0;
  for (const std::string topoName : {"torus:4:2", "ndv4"}) {
    const topo::Topology t = preset(topoName);
    for (CollectiveKind coll : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll}) {
      std::vector<ir::Algorithm> algos;
      for (const auto& info : algorithms::classicAlgorithms()) {
        if (info.collective != coll) continue;
        if (auto a = algorithms::makeClassic(info.name, t.ranks()); a.isOk())
          algos.push_back(std::move(a).value());
      }
      ASSERT_GE(algos.size(), 2u) << topoName;
      std::vector<const ir::Algorithm*> ptrs;
      for (const ir::Algorithm& a : algos) ptrs.push_back(&a);
      sim::Options o;
      o.bytes = size_t{64} << 20;
      o.criticalPath = false;
      const std::vector<double> fast = sim::fastestByBound(ptrs, t, o, 2, std::chrono::seconds(60));
      ASSERT_EQ(fast.size(), algos.size());
      double best = 0, found = 0;
      for (size_t i = 0; i < algos.size(); ++i) {
        const double each = mustSimulate(algos[i], t, o).algbw;
        best = std::max(best, each);
        found = std::max(found, fast[i]);
        // What it simulated, it simulated as simulate() does.
        if (fast[i] > 0) {
          EXPECT_EQ(fast[i], each) << algos[i].name;
          ++simulated;
        }
        ++all;
      }
      EXPECT_EQ(found, best) << collectiveName(coll) << " on " << topoName;
    }
  }
  EXPECT_LT(simulated, all);
  // One that cannot run here (more ranks than the topology) is left out,
  // with 0, and the others are still compared; none at all gives none.
  const topo::Topology ring4 = preset("ring:4");
  const ir::Algorithm wide = algorithms::ringAllReduce(8), fits = algorithms::ringAllReduce(4);
  sim::Options o;
  o.bytes = size_t{1} << 20;
  o.criticalPath = false;
  const std::vector<double> mixed =
      sim::fastestByBound({&wide, &fits}, ring4, o, 2, std::chrono::seconds(60));
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_EQ(mixed[0], 0);
  EXPECT_EQ(mixed[1], mustSimulate(fits, ring4, o).algbw);
  EXPECT_TRUE(sim::fastestByBound({}, ring4, o, 2, std::chrono::seconds(60)).empty());
}

// Two flows into one rank through a switch share its last link: half speed each.
TEST(Sim, FlowsSharingALinkGetHalfEach) {
  topo::Topology t;
  int r0 = t.addRank(), r1 = t.addRank(), r2 = t.addRank();
  int sw = t.addNode("switch", topo::NodeKind::kSwitch);
  for (int r : {r0, r1}) t.connect(r, sw, 100, 0, topo::LinkKind::kGeneric);
  t.connect(sw, r2, 50, 0, topo::LinkKind::kGeneric);
  lang::Program p({.name = "two_to_one", .collective = "gather", .ranks = 3, .root = 2});
  p.chunk(0, lang::kInput, 0).copy(2, lang::kOutput, 0);
  p.chunk(1, lang::kInput, 0).copy(2, lang::kOutput, 1);
  p.chunk(2, lang::kInput, 0).copy(2, lang::kOutput, 2);
  compiler::Compiled c = compiler::compile(p);
  ASSERT_TRUE(c.ok());
  size_t bytes = size_t{3} << 20;  // each rank's share 1 MiB
  sim::Result r = mustSimulate(c.algo, t, plain(bytes));
  double want = (1 << 20) / (25 * kGB);
  EXPECT_NEAR(r.time, want, want * 0.01);
  // The shared link carried both, the others one each.
  int shared = -1;
  for (size_t l = 0; l < t.links.size(); ++l)
    if (t.links[l].from == sw && t.links[l].to == r2) shared = static_cast<int>(l);
  EXPECT_NEAR(r.linkBytes[static_cast<size_t>(shared)], 2.0 * (1 << 20), 1);
}

// Rates are recomputed only where a change can reach, over the links that
// can fill (docs/simulator.md); the reference recomputes every rate over
// every link on each change. Both give the same prediction, link bytes and
// timeline wherever links are shared: oversubscribed spines, NICs shared by
// a node's rings, a receive cap, and the production files on NDv4.
TEST(Sim, IncrementalRatesAgreeWithTheReference) {
  struct Case {
    std::string what;
    ir::Algorithm algo;
    topo::Topology topo;
  };
  std::vector<Case> cases;
  auto program = [](const std::string& name, int n, int gpus) {
    const lang::ProgramEntry* e = lang::findProgram(name);
    EXPECT_NE(e, nullptr) << name;
    lang::ProgramOptions given, options;
    given.name = name;
    given.ranks = n;
    given.gpusPerNode = gpus;
    std::string problem;
    EXPECT_TRUE(lang::programOptions(*e, given, &options, &problem)) << problem;
    compiler::Compiled c = compiler::compileByRanks(*e, options, 1);
    EXPECT_TRUE(c.ok()) << name;
    return c.algo;
  };
  for (const char* t : {"fattree:4:8:4", "fattree:4:8"}) {
    cases.push_back({std::string("ring on ") + t, algorithms::ringAllReduce(32), preset(t)});
    cases.push_back(
        {std::string("all-pairs on ") + t, algorithms::pairwiseAllToAll(32), preset(t)});
    cases.push_back(
        {std::string("hierarchical on ") + t, program("hierarchical_allreduce", 32, 8), preset(t)});
    cases.push_back(
        {std::string("two-step on ") + t, program("twostep_alltoall", 32, 8), preset(t)});
  }
  topo::Topology capped = preset("full:6");
  capped.nodes[static_cast<size_t>(capped.nodeOfRank(0))].recvCap = 30;
  capped.nodes[static_cast<size_t>(capped.nodeOfRank(3))].sendCap = 40;
  cases.push_back({"capped all-pairs", algorithms::pairwiseAllToAll(6), capped});
  for (const std::string& f : testing::productionFiles())
    cases.push_back({f, testing::mustRead(f), preset("ndv4")});
  int compared = 0;
  for (const Case& c : cases)
    for (size_t bytes : {size_t{1} << 16, size_t{32} << 20}) {
      SCOPED_TRACE(c.what + " at " + std::to_string(bytes) + " bytes");
      sim::Options o;
      o.bytes = bytes;
      o.inplace = !c.algo.outofplace;
      o.timelineStep = 2e-6;
      o.recordOrder = true;
      sim::Result fast = mustSimulate(c.algo, c.topo, o);
      o.incrementalRates = false;
      sim::Result slow = mustSimulate(c.algo, c.topo, o);
      ASSERT_GT(slow.time, 0);
      EXPECT_NEAR(fast.time, slow.time, slow.time * 1e-9);
      EXPECT_EQ(fast.transfers, slow.transfers);
      EXPECT_EQ(fast.order.size(), slow.order.size());
      ASSERT_EQ(fast.linkBytes.size(), slow.linkBytes.size());
      for (size_t l = 0; l < slow.linkBytes.size(); ++l)
        EXPECT_NEAR(fast.linkBytes[l], slow.linkBytes[l], 1 + slow.linkBytes[l] * 1e-9) << l;
      ASSERT_EQ(fast.timeline.size(), slow.timeline.size());
      for (size_t l = 0; l < slow.timeline.size(); ++l) {
        ASSERT_EQ(fast.timeline[l].size(), slow.timeline[l].size()) << l;
        for (size_t b = 0; b < slow.timeline[l].size(); ++b)
          EXPECT_NEAR(fast.timeline[l][b], slow.timeline[l][b], 1 + slow.timeline[l][b] * 1e-6);
      }
      ++compared;
    }
  EXPECT_EQ(compared, 2 * static_cast<int>(cases.size()));
  EXPECT_GT(cases.size(), 10u);
}

// LL puts 16 bytes on the wire for 8 useful ones, LL128 128 for 120.
TEST(Sim, ProtocolEfficiency) {
  topo::Topology ring = preset("ring:4");
  ir::Algorithm simple = algorithms::ringAllReduce(4);
  ir::Algorithm ll = simple, ll128 = simple;
  ll.protocol = ir::Protocol::kLL;
  ll128.protocol = ir::Protocol::kLL128;
  for (auto* t : {&ring}) {
    for (topo::Link& l : t->links) l.latency = 0;
  }
  double s = mustSimulate(simple, ring, plain(1 << 24)).time;
  EXPECT_NEAR(mustSimulate(ll, ring, plain(1 << 24)).time, 2 * s, 2 * s * 0.01);
  EXPECT_NEAR(mustSimulate(ll128, ring, plain(1 << 24)).time, s * 128 / 120, s * 0.01);
  // With their own slices and step latencies, LL wins small sizes and
  // Simple large ones.
  sim::Options small, large;
  small.bytes = 4 << 10;
  large.bytes = 256 << 20;
  EXPECT_LT(mustSimulate(ll, ring, small).time, mustSimulate(simple, ring, small).time);
  EXPECT_GT(mustSimulate(ll, ring, large).time, mustSimulate(simple, ring, large).time);
  // Options::protocol runs an algorithm on another layout with its own
  // slices: the same as the algorithm rewritten for that layout at those
  // slices.
  for (ir::Protocol p : {ir::Protocol::kLL, ir::Protocol::kLL128}) {
    ir::Algorithm as = simple;
    as.protocol = p;
    sim::Options on = small, same = small;
    on.protocol = static_cast<int>(p);
    same.sliceBytes = ir::defaultSliceBytes(ir::Protocol::kSimple);
    EXPECT_EQ(mustSimulate(simple, ring, on).time, mustSimulate(as, ring, same).time);
    EXPECT_NE(mustSimulate(simple, ring, on).time, mustSimulate(simple, ring, small).time);
  }
}

// Every production file on NDv4 runs below the box's bound (each GPU moves
// at most 300 GB/s through the NVSwitch, plus 25 through its NIC).
TEST(Sim, ProductionFilesStayBelowTheNdv4Bound) {
  topo::Topology ndv4 = preset("ndv4");
  for (const std::string& f : testing::productionFiles()) {
    ir::Algorithm a = testing::mustRead(f);
    for (size_t bytes : {size_t{1} << 20, size_t{64} << 20}) {
      sim::Options o;
      o.bytes = bytes;
      o.inplace = !a.outofplace;
      o.criticalPath = false;
      auto r = sim::simulate(a, ndv4, o);
      ASSERT_TRUE(r.isOk()) << f << ": " << r.status().toString();
      EXPECT_GT(r.value().busbw, 0) << f;
      EXPECT_LT(r.value().busbw, 325) << f;
    }
  }
}

// The simulator keeps the runtime's semantics: every step ends after the
// step it depends on and after the send of the message it receives, and
// each threadblock's steps follow one another (checked on the trace).
TEST(Sim, TraceKeepsDependenciesAndMessageOrder) {
  ir::Algorithm a = testing::mustRead(std::string(CHORUS_MSCCL_DIR) + "/ap4ll.xml");
  sim::Options o;
  o.bytes = 1 << 20;
  o.inplace = !a.outofplace;
  o.trace = true;
  sim::Result r = mustSimulate(a, preset("ndv4"), o);
  auto doc = nlohmann::json::parse(r.trace);
  // (rank, tb, iteration, step) -> [start, end]
  std::map<std::tuple<int, int, int, int>, std::pair<double, double>> when;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X")
      when[{e["pid"].get<int>(), e["tid"].get<int>(), e["args"]["iteration"].get<int>(),
            e["args"]["step"].get<int>()}] = {e["ts"].get<double>(),
                                              e["ts"].get<double>() + e["dur"].get<double>()};
  ASSERT_EQ(when.size(), a.totalSteps() * r.iterations);
  const double eps = 1e-6;
  for (const ir::Rank& rank : a.ranks)
    for (const ir::Threadblock& tb : rank.tbs)
      for (int it = 0; it < static_cast<int>(r.iterations); ++it)
        for (size_t k = 0; k < tb.steps.size(); ++k) {
          auto me = when.at({rank.id, tb.id, it, static_cast<int>(k)});
          if (k > 0) {
            EXPECT_GE(me.first + eps,
                      when.at({rank.id, tb.id, it, static_cast<int>(k) - 1}).second);
          }
          const ir::Step& s = tb.steps[k];
          if (s.depTb >= 0) {
            EXPECT_GE(me.second + eps, when.at({rank.id, s.depTb, it, s.depStep}).second);
          }
        }
}

// The simulator and the runtime agree on the order of events: the order in
// which the simulator finished every step instance is one the runtime can
// run step by step (each step's dependency, message and slot are there
// when its turn comes), and running it gives the right data. Small slices
// and few slots make many iterations and exercise the slot rule. Slices
// moved in two parts (Simple's) keep the order valid: a part holds its slot
// until the receiver is done with it, so a whole message in flight (its
// last part sent, its receive not finished) holds one, and whole messages
// never exceed the slots either; with whole slices the two also deadlock
// alike.
TEST(Sim, TheRuntimeRunsTheSimulatedOrder) {
  struct Case {
    ir::Algorithm algo;
    std::string topo;
  };
  std::vector<Case> cases;
  for (const std::string& f : testing::productionFiles())
    cases.push_back({testing::mustRead(f), "ndv4"});
  cases.push_back({algorithms::ringAllReduce(4), "ring:4"});
  cases.push_back({algorithms::ringAllGather(5), "fattree:2:3"});
  cases.push_back({algorithms::pairwiseAllToAll(6), "dgx1@0,1,2,3,4,5"});
  for (const Case& c : cases)
    for (int slots : {1, 2, 8})
      for (size_t parts : {1, 2}) {
        SCOPED_TRACE(c.algo.name + " on " + c.topo + ", " + std::to_string(slots) + " slots, " +
                     std::to_string(parts) + " part(s)");
        auto va = runtime::VerifiedAlgorithm::make(c.algo);
        ASSERT_TRUE(va.isOk()) << va.status().toString();
        sim::Options o;
        o.sliceBytes = 1024;
        // 3 KiB per chunk: three slices.
        o.bytes = (size_t{3} << 10) * static_cast<size_t>(c.algo.nchunksPerLoop);
        o.slots = slots;
        o.partsPerSlice = parts;
        o.inplace = !c.algo.outofplace;
        o.recordOrder = true;
        o.criticalPath = false;
        auto simulated = sim::simulate(c.algo, preset(c.topo), o);
        if (!simulated.isOk()) {
          // Too few slots for this algorithm: the runtime must deadlock too.
          ASSERT_EQ(simulated.status().code(), StatusCode::kDeadlock)
              << simulated.status().toString();
          if (parts > 1) continue;  // parts hold slots longer than whole slices
          auto data = runtime::CollectiveData::make(*va.value(), size_t{1} << 12,
                                                    DataType::kFloat32, ReduceOp::kSum, o.inplace);
          ASSERT_TRUE(data.isOk());
          runtime::DeterministicOptions d;
          d.sliceBytes = o.sliceBytes;
          d.slots = slots;
          EXPECT_EQ(runtime::runDeterministic(*va.value(), data.value().calls(), d).code(),
                    StatusCode::kDeadlock);
          continue;
        }
        const sim::Result& r = simulated.value();
        ASSERT_GT(r.iterations, 1u);
        ASSERT_EQ(r.order.size(), c.algo.totalSteps() * r.iterations);
        auto data = runtime::CollectiveData::make(*va.value(), r.count, DataType::kFloat32,
                                                  ReduceOp::kSum, o.inplace);
        ASSERT_TRUE(data.isOk()) << data.status().toString();
        auto call =
            runtime::PreparedCall::make(*va.value(), data.value().calls(), o.sliceBytes, slots);
        ASSERT_TRUE(call.isOk()) << call.status().toString();
        Status st = call.value()->runInOrder(r.order);
        ASSERT_TRUE(st.isOk()) << st.toString();
        std::string first;
        EXPECT_EQ(data.value().countWrong(&first), 0u) << first;
        // The check can fail: the first receive moved before the send of its
        // message.
        std::vector<ir::StepInstance> wrong = r.order;
        auto tbOf = [&](const ir::StepInstance& e) -> const ir::Threadblock& {
          return c.algo.ranks[static_cast<size_t>(e.rank)].tbs[static_cast<size_t>(e.tb)];
        };
        size_t k = 0;
        while (!ir::receives(tbOf(wrong[k]).steps[static_cast<size_t>(wrong[k].step)].type)) ++k;
        const ir::Threadblock& to = tbOf(wrong[k]);
        size_t j = 0;
        while (!(wrong[j].rank == to.recvPeer && tbOf(wrong[j]).sendPeer == wrong[k].rank &&
                 tbOf(wrong[j]).channel == to.channel))
          ++j;
        ASSERT_LT(j, k);
        std::rotate(wrong.begin() + static_cast<std::ptrdiff_t>(j),
                    wrong.begin() + static_cast<std::ptrdiff_t>(k),
                    wrong.begin() + static_cast<std::ptrdiff_t>(k) + 1);
        data.value().reset();
        st = call.value()->runInOrder(wrong);
        EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.toString();
      }
}

// Chorus's runtimes move a step's slice whole, one message a slot
// (runtime/exec/engine.h), as the verifier's slot rule counts them;
// MSCCL's executor moves a Simple slice in two parts, each holding a slot
// (Options::partsPerSlice, the protocol's by default). Two ranks that each
// send 6 messages before they receive one: the verifier proves it with 8
// slots, and the runtime's deterministic driver runs it with 8 and gives
// the right data, as the simulator does with whole slices; in two parts,
// 12 slots' worth, the simulator finds the deadlock, and so does the
// runtime with 4 slots.
TEST(Sim, ChorusRuntimesHoldOneSlotAMessage) {
  constexpr int kAhead = 6;
  std::string xml = fmt::format(
      "<algo name=\"ahead\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"{}\" "
      "ngpus=\"2\" coll=\"allgather\" inplace=\"0\" outofplace=\"1\">\n",
      2 * kAhead);
  for (int r = 0; r < 2; ++r) {
    const int peer = 1 - r;
    xml += fmt::format("<gpu id=\"{}\" i_chunks=\"{}\" o_chunks=\"{}\" s_chunks=\"0\">\n", r,
                       kAhead, 2 * kAhead);
    xml += fmt::format("<tb id=\"0\" send=\"{}\" recv=\"{}\" chan=\"0\">\n", peer, peer);
    auto step = [&](int s, const char* type, const char* src, int srcOff, const char* dst,
                    int dstOff) {
      xml += fmt::format(
          "<step s=\"{}\" type=\"{}\" srcbuf=\"{}\" srcoff=\"{}\" dstbuf=\"{}\" dstoff=\"{}\" "
          "cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n",
          s, type, src, srcOff, dst, dstOff);
    };
    for (int k = 0; k < kAhead; ++k) step(k, "s", "i", k, "i", -1);
    for (int k = 0; k < kAhead; ++k) step(kAhead + k, "r", "i", -1, "o", peer * kAhead + k);
    xml += "</tb>\n<tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">\n";
    for (int k = 0; k < kAhead; ++k) step(k, "cpy", "i", k, "o", r * kAhead + k);
    xml += "</tb>\n</gpu>\n";
  }
  xml += "</algo>\n";
  ir::ReadResult read = ir::readXml(xml, "ahead.xml");
  ASSERT_TRUE(read.algorithm) << read.diagnostics.items().front().format();
  auto va = runtime::VerifiedAlgorithm::make(*read.algorithm);
  ASSERT_TRUE(va.isOk()) << va.status().toString();
  const size_t count = size_t{kAhead} << 10;  // elements per rank: 4 KiB a chunk
  sim::Options o;
  o.bytes = count * 4 * 2;
  o.partsPerSlice = 1;
  EXPECT_TRUE(sim::simulate(*read.algorithm, preset("ring:2"), o).isOk());
  o.partsPerSlice = 2;
  auto halves = sim::simulate(*read.algorithm, preset("ring:2"), o);
  ASSERT_FALSE(halves.isOk());
  EXPECT_EQ(halves.status().code(), StatusCode::kDeadlock) << halves.status().toString();
  for (int slots : {8, 4}) {
    SCOPED_TRACE(std::to_string(slots) + " slots");
    auto data = runtime::CollectiveData::make(*va.value(), count, DataType::kFloat32,
                                              ReduceOp::kSum, false);
    ASSERT_TRUE(data.isOk()) << data.status().toString();
    runtime::DeterministicOptions d;
    d.slots = slots;
    const Status st = runtime::runDeterministic(*va.value(), data.value().calls(), d);
    if (slots == 4) {
      EXPECT_EQ(st.code(), StatusCode::kDeadlock) << st.toString();
      continue;
    }
    ASSERT_TRUE(st.isOk()) << st.toString();
    std::string first;
    EXPECT_EQ(data.value().countWrong(&first), 0u) << first;
  }
}

TEST(Topo, PresetsHaveTheirShapes) {
  struct Case {
    const char* name;
    int ranks;
  };
  for (auto [name, ranks] :
       {Case{"dgx1", 8}, Case{"ndv2:2", 16}, Case{"dgx2:2", 32}, Case{"ndv4:4", 32},
        Case{"dgx-h100:2", 16}, Case{"mi250", 16}, Case{"mi250:2", 32}, Case{"ring:5", 5},
        Case{"torus:4", 16}, Case{"full:6", 6}, Case{"fattree:4:8:2", 32}, Case{"dgx1@0,1,4,5", 4},
        Case{"gpu:8", 8}, Case{"gpu:2:1000", 2}}) {
    topo::Topology t = preset(name);
    EXPECT_EQ(t.ranks(), ranks) << name;
    EXPECT_TRUE(t.validate().isOk()) << name << ": " << t.validate().toString();
    for (int a = 0; a < t.ranks(); ++a)  // every rank reaches every other
      for (int b = 0; b < t.ranks(); ++b)
        if (a != b) {
          EXPECT_FALSE(t.route(a, b).empty()) << name << " " << a << "->" << b;
        }
  }
  // DGX-1: six NVLinks per GPU (150 GB/s out); the subset keeps 0-1 (x2), 0-4 (x2), 1-5, 4-5 (x2).
  topo::Topology d = preset("dgx1");
  double out = 0;
  for (const topo::Link& l : d.links) out += l.from == d.nodeOfRank(3) ? l.bandwidth : 0;
  EXPECT_EQ(out, 150);
  EXPECT_EQ(preset("dgx1@0,1,4,5").links.size(), 8u);
  // Routes: through the NVSwitch inside a box, NIC and fabric across.
  topo::Topology two = preset("ndv4:2");
  EXPECT_EQ(two.route(0, 1).size(), 2u);
  EXPECT_EQ(two.route(0, 9).size(), 4u);
  // One GPU: its ranks' links to its memory share a quarter of the copy
  // bandwidth (each byte crosses it twice, read and written), local work
  // half of it.
  topo::Topology gpu = preset("gpu:8:4000");
  EXPECT_EQ(gpu.route(0, 5).size(), 2u);
  for (const topo::Link& l : gpu.links) EXPECT_EQ(l.bandwidth, 4000.0 / 4 / 8);
  EXPECT_EQ(gpu.memoryBandwidth, 4000.0 / 2 / 8);
  for (const char* bad : {"nosuch", "ring", "ring:0", "ring:x", "ndv2:3", "dgx1@9", "dgx1@1,1",
                          "ndv4:1:2", "gpu", "gpu:0"}) {
    auto t = topo::makePreset(bad);
    EXPECT_FALSE(t.isOk()) << bad;
  }
}

TEST(Topo, JsonRoundTripsAndBadFilesSayWhere) {
  topo::Topology t = preset("ndv4:2");
  t.nodes[3].sendCap = 40;
  t.nodes[5].recvCap = 12.5;
  auto back = topo::parseTopology(topo::writeTopology(t), "mem.json");
  ASSERT_TRUE(back.isOk()) << back.status().toString();
  EXPECT_EQ(back.value().ranks(), t.ranks());
  EXPECT_EQ(back.value().nodes[3].sendCap, 40);
  EXPECT_EQ(back.value().nodes[5].recvCap, 12.5);
  EXPECT_EQ(back.value().nodes[4].sendCap, 0);
  ASSERT_EQ(back.value().links.size(), t.links.size());
  for (size_t i = 0; i < t.links.size(); ++i) {
    EXPECT_EQ(back.value().links[i].from, t.links[i].from);
    EXPECT_DOUBLE_EQ(back.value().links[i].bandwidth, t.links[i].bandwidth);
    EXPECT_NEAR(back.value().links[i].latency, t.links[i].latency, 1e-15);
  }
  struct Bad {
    const char* text;
    const char* says;
  };
  for (auto [text, says] :
       {Bad{"[]", "not a JSON object"}, Bad{"{\"links\": []}", "missing array 'nodes'"},
        Bad{R"({"nodes": [{"name": "a"}], "links": [{"from": "a", "to": "b", "bandwidth": 1}]})",
            "links[0]: no node named 'b'"},
        Bad{R"({"nodes": [{"name": "a"}, {"name": "b"}], "links": [{"from": "a", "to": "b"}]})",
            "links[0]: needs 'bandwidth'"},
        Bad{R"({"nodes": [{"name": "a"}, {"name": "a"}], "links": []})", "nodes[1]: the name"},
        Bad{R"({"nodes": [{"name": "a", "send_cap": "x"}], "links": []})",
            "nodes[0]: 'send_cap' must be a number"},
        Bad{R"({"nodes": [{"name": "a"}, {"name": "s", "kind": "switch", "recv_cap": 5}],
               "links": []})",
            "has a send/receive cap but is not a rank"},
        Bad{R"({"nodes": [{"name": "s", "kind": "switch"}], "links": []})", "no ranks"},
        Bad{R"({"nodes": [{"name": "a", "kind": "gpu"}], "links": []})", "nodes[0]: 'kind'"}}) {
    auto r = topo::parseTopology(text, "bad.json");
    ASSERT_FALSE(r.isOk()) << text;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("bad.json"), std::string::npos);
  }
}

// NCCL's topology XML: GPUs by rank, the NVSwitch and direct NVLinks, the
// PCI tree and NICs; several boxes share one network.
TEST(Topo, NcclTopologyXml) {
  const std::string file = std::string(CHORUS_SOURCE_DIR) + "/tests/data/topo/nccl_box.xml";
  auto one = topo::loadTopology(file);
  ASSERT_TRUE(one.isOk()) << one.status().toString();
  const topo::Topology& t = one.value();
  EXPECT_EQ(t.ranks(), 4);
  EXPECT_EQ(t.nodes[static_cast<size_t>(t.nodeOfRank(0))].name, "gpu0");
  ASSERT_EQ(t.route(0, 1).size(), 1u);  // the direct NVLinks (2 x 25)
  EXPECT_EQ(t.links[static_cast<size_t>(t.route(0, 1)[0])].bandwidth, 50);
  ASSERT_EQ(t.route(0, 2).size(), 2u);  // through the NVSwitch (12 x 25)
  EXPECT_EQ(t.links[static_cast<size_t>(t.route(0, 2)[0])].bandwidth, 300);
  auto two = topo::loadTopology(file + ":2");
  ASSERT_TRUE(two.isOk()) << two.status().toString();
  EXPECT_EQ(two.value().ranks(), 8);
  bool viaNetwork = false;
  for (int l : two.value().route(0, 4))
    viaNetwork =
        viaNetwork || two.value().links[static_cast<size_t>(l)].kind == topo::LinkKind::kInfiniband;
  EXPECT_TRUE(viaNetwork);
  sim::Options o;
  o.bytes = 1 << 24;
  sim::Result r = mustSimulate(algorithms::ringAllReduce(8), two.value(), o);
  EXPECT_GT(r.busbw, 0);
  EXPECT_LT(r.busbw, 25);  // the ring crosses 25 GB/s NICs
  for (const char* bad : {"<system", "<other/>", "<system version=\"1\"><cpu/></system>"}) {
    auto e = topo::parseNcclTopology(bad, "bad.xml", 1);
    ASSERT_FALSE(e.isOk()) << bad;
    EXPECT_NE(e.status().message().find("bad.xml"), std::string::npos) << e.status().message();
  }
  EXPECT_FALSE(topo::loadTopology(file + ":x").isOk());
}

// Found by fuzz_topology: a non-UTF-8 attribute of NCCL's XML became a
// node name, and writing the topology as JSON threw (nlohmann's
// type_error 316) instead of the reader refusing the file.
TEST(NcclTopology, TextThatIsNotUtf8IsRefusedAndNamesNeverThrow) {
  std::string xml =
      "<system version=\"1\"><cpu numaid=\"\x91\"><pci busid=\"0000:01:00.0\">"
      "<gpu dev=\"0\"/></pci></cpu></system>";
  auto e = topo::parseNcclTopology(xml, "latin1.xml", 1);
  ASSERT_FALSE(e.isOk());
  EXPECT_NE(e.status().message().find("latin1.xml: not UTF-8"), std::string::npos)
      << e.status().message();
  // Found by fuzz_topology: a NIC speed past double's range became an
  // infinite bandwidth, which JSON cannot hold.
  std::string inf =
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\">"
      "<gpu dev=\"0\"/></pci><pci busid=\"0000:02:00.0\"><nic><net speed=\"1e999\"/>"
      "</nic></pci></cpu></system>";
  auto big = topo::parseNcclTopology(inf, "inf.xml", 2);
  ASSERT_FALSE(big.isOk());
  EXPECT_NE(big.status().message().find("finite bandwidth"), std::string::npos)
      << big.status().message();
  // A name from a file path that is not UTF-8 is written with U+FFFD.
  topo::Topology t = preset("ring:2");
  t.name = "ring\xff";
  std::string json = topo::writeTopology(t);
  EXPECT_NE(json.find("ring\xef\xbf\xbd"), std::string::npos) << json;
}

// Found by fuzz_topology: a latency written in microseconds read back one
// ulp off (us * 1e-6 != the seconds it came from).
TEST(TopologyJson, LatenciesReadBackExactly) {
  for (double s : {1e-7, 0.35e-6, 0.1e-6 * 3, 3.3e-6, 0.09999999999999999e-6, 7e-9}) {
    topo::Topology t = preset("ring:2");
    for (topo::Link& l : t.links) l.latency = s;
    auto back = topo::parseTopology(topo::writeTopology(t), "t.json");
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    for (const topo::Link& l : back.value().links) EXPECT_EQ(l.latency, s);
  }
}

// A search stops a simulation two ways: its deadline (kTimeout) and a flag
// another thread sets (kAborted); neither stops one left to run.
TEST(Sim, ADeadlineOrItsCallerStopsIt) {
  topo::Topology ring = preset("ring:8");
  sim::Options o;
  o.bytes = size_t{1} << 22;
  o.sliceBytes = 4096;  // a thousand slices: well past the checks' 4096 events
  std::atomic<bool> stop{false};
  o.abort = &stop;
  EXPECT_TRUE(sim::simulate(algorithms::ringAllReduce(8), ring, o).isOk());
  stop = true;
  auto aborted = sim::simulate(algorithms::ringAllReduce(8), ring, o);
  ASSERT_FALSE(aborted.isOk());
  EXPECT_EQ(aborted.status().code(), StatusCode::kAborted);
  o.abort = nullptr;
  o.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  auto late = sim::simulate(algorithms::ringAllReduce(8), ring, o);
  ASSERT_FALSE(late.isOk());
  EXPECT_EQ(late.status().code(), StatusCode::kTimeout);
}

TEST(Sim, BadInputIsAnError) {
  topo::Topology ring4 = preset("ring:4");
  auto big = sim::simulate(algorithms::ringAllReduce(8), ring4, sim::Options{});
  ASSERT_FALSE(big.isOk());
  EXPECT_NE(big.status().message().find("has 4"), std::string::npos);
  sim::Options tiny;
  tiny.bytes = 4;
  EXPECT_FALSE(sim::simulate(algorithms::ringAllReduce(4), ring4, tiny).isOk());
  // Two islands: rank 0 cannot reach rank 1.
  topo::Topology split;
  split.addRank();
  split.addRank();
  auto r = sim::simulate(algorithms::ringAllReduce(2), split, sim::Options{});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("cannot reach"), std::string::npos);
  // A dependency on a threadblock, or a step, that is not there.
  for (const auto& [tb, step] : {std::pair{7, 0}, std::pair{0, 99}}) {
    ir::Algorithm bad = algorithms::ringAllReduce(4);
    ir::Step& s = bad.ranks[2].tbs[0].steps[1];
    s.depTb = tb;
    s.depStep = step;
    s.hasDep = true;
    auto dep = sim::simulate(bad, ring4, sim::Options{});
    ASSERT_FALSE(dep.isOk());
    EXPECT_EQ(dep.status().message(),
              fmt::format("rank 2 tb {} step 1: it depends on tb {} step {}, which does not exist",
                          bad.ranks[2].tbs[0].id, tb, step));
  }
  // Counts past the simulator's 32 bits: slice iterations (a TiB in
  // slices of one element), parts per slice.
  sim::Options many;
  many.bytes = size_t{1} << 40;
  many.sliceBytes = 4;
  auto iterations = sim::simulate(algorithms::ringAllReduce(4), ring4, many);
  ASSERT_FALSE(iterations.isOk());
  EXPECT_NE(iterations.status().message().find("slice iterations: the simulator counts at most"),
            std::string::npos)
      << iterations.status().message();
  sim::Options parts;
  parts.partsPerSlice = size_t{1} << 17;
  auto tooManyParts = sim::simulate(algorithms::ringAllReduce(4), ring4, parts);
  ASSERT_FALSE(tooManyParts.isOk());
  EXPECT_NE(tooManyParts.status().message().find("parts per slice"), std::string::npos);
}

}  // namespace
}  // namespace chorus
