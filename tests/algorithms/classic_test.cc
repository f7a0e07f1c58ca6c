// Every built-in generator, for world sizes 1..9 (powers of two and not) and
// every root, is proven by the verifier and runs with real data in both call
// forms, with one slice per chunk and with one element per slice.
#include "algorithms/classic.h"

#include <gtest/gtest.h>

#include "runtime/exec/check.h"
#include "runtime/transport/local_transport.h"
#include "tests/support/collective_check.h"
#include "tests/support/files.h"
#include "tests/support/parts.h"

namespace chorus::algorithms {
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
}  // namespace chorus::algorithms

namespace chorus::algorithms {
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
}  // namespace chorus::algorithms

// Parts (docs/scale.md): a process of a large world builds and runs its own
// rank's part of a built-in (runtime/plan/planner.h).
namespace chorus::algorithms {
namespace {

std::vector<int> rootsOf(CollectiveKind k, int n) {
  if (!isRooted(k)) return {0};
  std::vector<int> roots{0, n / 2, n - 1};
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  return roots;
}

// Each rank's part, built alone, is that rank of the whole algorithm:
// header, every rank's id and chunk counts, and the rank's threadblocks
// step for step (ir::Rank's ==); the other ranks have no threadblocks.
TEST(ClassicParts, EachRanksPartIsItsRankOfTheWhole) {
  int compared = 0;
  for (const ClassicInfo& info : classicAlgorithms()) {
    for (int n = 1; n <= 64; ++n) {
      for (int root : rootsOf(info.collective, n)) {
        SCOPED_TRACE(info.name + " n=" + std::to_string(n) + " root=" + std::to_string(root));
        const ir::Algorithm whole = makeClassic(info.name, n, root).value();
        for (int r = 0; r < n; ++r) {
          auto part = makeClassic(info.name, n, root, r);
          ASSERT_TRUE(part.isOk()) << part.status().message();
          ASSERT_TRUE(chorus::testing::isRanksPart(part.value(), whole, r));
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 13 * 2000);
  EXPECT_EQ(makeClassic("ring_allreduce", 4, 0, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(makeClassic("ring_allreduce", 4, 0, -2).status().code(), StatusCode::kInvalidArgument);
}

// What the runtime relies on past CHORUS_PROVE_RANKS (runtime/plan/planner.h's
// kBuiltinFamilyBasis): every family verified at sampled rank counts past
// the ones above, primes and non-powers of two included, with the first,
// middle and last root.
TEST(ClassicParts, FamiliesVerifyAtSampledRankCounts) {
  for (const ClassicInfo& info : classicAlgorithms()) {
    for (int n : {12, 16, 31, 32, 33, 64, 100, 128}) {
      for (int root : rootsOf(info.collective, n)) {
        SCOPED_TRACE(info.name + " n=" + std::to_string(n) + " root=" + std::to_string(root));
        verify::Report rep = verify::verifyAlgorithm(makeClassic(info.name, n, root).value());
        ASSERT_TRUE(rep.correct());
        if (isRooted(info.collective)) {
          EXPECT_EQ(rep.root, root);
        }
      }
    }
  }
}

// A part of a proven whole is its rank of the whole; a part from the family
// alone may send fewer messages by reference than the whole (it sees no
// path through other ranks), never more, and never claims a copying
// receiver it cannot see.
TEST(ClassicParts, PlansOfPartsAreTheWholesOrMoreCautious) {
  int cautious = 0, kept = 0;
  for (const ClassicInfo& info : classicAlgorithms()) {
    for (int n : {2, 3, 4, 5, 8, 9}) {
      for (int root : rootsOf(info.collective, n)) {
        SCOPED_TRACE(info.name + " n=" + std::to_string(n) + " root=" + std::to_string(root));
        auto whole = runtime::VerifiedAlgorithm::make(makeClassic(info.name, n, root).value());
        ASSERT_TRUE(whole.isOk());
        for (int r = 0; r < n; ++r) {
          auto part = whole.value()->part(r);
          EXPECT_EQ(part->partRank(), r);
          EXPECT_TRUE(chorus::testing::isRanksPart(part->algo(), whole.value()->algo(), r));
          EXPECT_TRUE(part->basis().empty());
          EXPECT_EQ(part->root(), whole.value()->root());
          auto family = runtime::VerifiedAlgorithm::fromFamily(
              makeClassic(info.name, n, root, r).value(), r, root, "test");
          EXPECT_EQ(family->basis(), "test");
          for (bool inplace : {false, true}) {
            const runtime::RefPlan& w = whole.value()->refPlan(r, inplace);
            const runtime::RefPlan& f = family->refPlan(r, inplace);
            ASSERT_EQ(f.kinds.size(), w.kinds.size());
            for (size_t t = 0; t < w.kinds.size(); ++t) {
              ASSERT_EQ(f.kinds[t].size(), w.kinds[t].size());
              for (size_t i = 0; i < w.kinds[t].size(); ++i) {
                EXPECT_NE(f.kinds[t][i], runtime::kRefToCopier);
                if (f.kinds[t][i] != runtime::kRefNever) {
                  EXPECT_NE(w.kinds[t][i], runtime::kRefNever) << "tb " << t << " step " << i;
                  ++kept;
                } else if (w.kinds[t][i] != runtime::kRefNever) {
                  ++cautious;
                }
              }
            }
          }
        }
      }
    }
  }
  // Both happen: the ring allreduce's reduce-scatter sends need the path
  // around the ring; its allgather's sends do not.
  EXPECT_GT(cautious, 0);
  EXPECT_GT(kept, 0);
}

// planReferences against its definition, checked the slow way: every
// write of the rank whose bytes overlap the message (actual buffers, in
// place or not) comes before the send or after the message's receive, by
// an unbounded search of the whole graph.
bool reaches(const verify::StepGraph& g, verify::NodeId a, verify::NodeId b) {
  std::vector<verify::NodeId> stack{b};
  std::vector<bool> seen(g.size(), false);
  while (!stack.empty()) {
    verify::NodeId n = stack.back();
    stack.pop_back();
    if (n == a) return true;
    for (verify::NodeId p : g.preds(n))
      if (p != verify::kNoNode && !seen[static_cast<size_t>(p)]) {
        seen[static_cast<size_t>(p)] = true;
        stack.push_back(p);
      }
  }
  return false;
}

TEST(ClassicParts, PlansFollowTheirDefinition) {
  std::vector<std::shared_ptr<const runtime::VerifiedAlgorithm>> algos;
  for (const ClassicInfo& info : classicAlgorithms())
    for (int n : {2, 3, 4, 6}) {
      algos.push_back(
          runtime::VerifiedAlgorithm::make(makeClassic(info.name, n, 1).value()).value());
    }
  for (const std::string& path : chorus::testing::productionFiles()) {
    if (chorus::testing::load(path)->algo().ngpus > 16) continue;  // the slow way is slow
    algos.push_back(chorus::testing::load(path));
  }
  int byRef = 0;
  for (const auto& va : algos) {
    const ir::Algorithm& a = va->algo();
    SCOPED_TRACE(a.name + " n=" + std::to_string(a.ngpus));
    DiagnosticList ignored;
    verify::StepGraph g(a, ignored);
    const size_t chunk = 1000;  // bytes per chunk
    for (int r = 0; r < a.ngpus; ++r) {
      for (bool inplace : {false, true}) {
        if (inplace ? !a.inplace : !a.outofplace) continue;
        // Real buffers (bytes) for a call of `count`, placed as NCCL's
        // in-place rule puts them (isInPlaceCall), or apart.
        runtime::CallArgs c;
        c.type = DataType::kUint8;
        c.count = a.nchunksPerLoop * chunk / runtime::countMultiplier(a);
        const auto [inElems, outElems] = runtime::bufferElems(a, c.count);
        std::vector<unsigned char> mem(2 * (inElems + outElems) + 1);
        unsigned char* out = mem.data() + inElems;
        unsigned char* in = out + outElems + 1;
        if (inplace) {
          const size_t share =
              countsWholeVector(a.collective) ? c.count / static_cast<size_t>(a.ngpus) : c.count;
          const size_t shift = static_cast<size_t>(r) * share;
          switch (a.collective) {
            case CollectiveKind::kAllGather:
            case CollectiveKind::kGather:
              in = out + shift;
              break;
            case CollectiveKind::kReduceScatter:
            case CollectiveKind::kScatter:
              in = out;
              out = in + shift;
              break;
            default:
              in = out;
          }
          c.sendbuff = in;
          c.recvbuff = out;
          ASSERT_TRUE(runtime::isInPlaceCall(a.collective, c, r, a.ngpus));
        }
        const uintptr_t scratch = reinterpret_cast<uintptr_t>(mem.data()) + (uintptr_t{1} << 40);
        auto base = [&](ir::Buffer b) {
          return b == ir::Buffer::kInput    ? reinterpret_cast<uintptr_t>(in)
                 : b == ir::Buffer::kOutput ? reinterpret_cast<uintptr_t>(out)
                                            : scratch;
        };
        auto lo = [&](ir::Buffer b, int off) { return base(b) + static_cast<size_t>(off) * chunk; };
        const runtime::RefPlan& plan = va->refPlan(r, inplace);
        const ir::Rank& me = a.ranks[static_cast<size_t>(r)];
        for (size_t t = 0; t < me.tbs.size(); ++t)
          for (size_t i = 0; i < me.tbs[t].steps.size(); ++i) {
            const ir::Step& s = me.tbs[t].steps[i];
            bool fromSrc = s.type == ir::StepType::kSend;
            uint8_t want = runtime::kRefNever;
            if (fromSrc || s.type == ir::StepType::kRecvCopySend ||
                s.type == ir::StepType::kRecvReduceCopySend) {
              uintptr_t m0 = fromSrc ? lo(s.srcBuf, s.srcOff) : lo(s.dstBuf, s.dstOff);
              uintptr_t m1 = m0 + static_cast<size_t>(s.count) * chunk;
              auto send = g.node(r, static_cast<int>(t), static_cast<int>(i));
              auto consumer = g.matchedRecv(send);
              bool stable = true;
              for (size_t u = 0; u < me.tbs.size(); ++u)
                for (size_t j = 0; j < me.tbs[u].steps.size(); ++j) {
                  const ir::Step& w = me.tbs[u].steps[j];
                  if (!ir::writesDst(w.type) || (u == t && j == i)) continue;
                  uintptr_t w0 = lo(w.dstBuf, w.dstOff);
                  uintptr_t w1 = w0 + static_cast<size_t>(w.count) * chunk;
                  if (!(w0 < m1 && m0 < w1)) continue;
                  auto write = g.node(r, static_cast<int>(u), static_cast<int>(j));
                  stable = stable && (reaches(g, write, send) ||
                                      (consumer != verify::kNoNode && reaches(g, consumer, write)));
                }
              if (stable) {
                auto rt = consumer == verify::kNoNode ? ir::StepType::kNop : g.step(consumer).type;
                want = fromSrc && (rt == ir::StepType::kRecv || rt == ir::StepType::kRecvCopySend)
                           ? runtime::kRefToCopier
                           : runtime::kRefStable;
              }
            }
            EXPECT_EQ(plan.kinds[t][i], want)
                << "rank " << r << (inplace ? " in place" : " out of place") << " tb " << t
                << " step " << i;
            byRef += want != runtime::kRefNever;
          }
      }
    }
  }
  EXPECT_GT(byRef, 1000);
}

// A part's connections are its rank's connections of the whole, sized the
// same (the fabric of a process is made from them).
TEST(ClassicParts, RankMessagesAreTheRanksLargestMessages) {
  std::vector<ir::Algorithm> algos;
  for (const ClassicInfo& info : classicAlgorithms())
    for (int n : {1, 2, 5, 8}) algos.push_back(makeClassic(info.name, n, n - 1).value());
  for (const std::string& path : chorus::testing::productionFiles()) {
    auto va = chorus::testing::load(path);
    ASSERT_TRUE(va);
    algos.push_back(va->algo());
  }
  for (const ir::Algorithm& a : algos) {
    SCOPED_TRACE(a.name + " n=" + std::to_string(a.ngpus));
    auto all = runtime::Fabric::largestMessages(a);
    for (int r = 0; r < a.ngpus; ++r) {
      decltype(all) mine;
      for (const auto& [key, cnt] : all)
        if (std::get<1>(key) == r || std::get<2>(key) == r) mine[key] = cnt;
      EXPECT_EQ(runtime::Fabric::rankMessages(a, r), mine) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace chorus::algorithms
