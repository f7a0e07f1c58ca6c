// The collective traits table (core/collectives.h) against a statement of
// each collective written out by hand here: the verifier proves algorithms
// against the table's `source` and the runtime checks data with it, so this
// test is the independent account that keeps both honest.
#include "core/collectives.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus {
namespace {

// Every output element of every rank, "first-last:index" ("-" where
// unconstrained), for 3 ranks, root 1, a block of 2 elements.
std::string sources(CollectiveKind k, size_t outElems) {
  std::string s;
  for (int r = 0; r < 3; ++r) {
    s += r == 0 ? "" : " | ";
    for (size_t e = 0; e < outElems; ++e) {
      auto from = traits(k).source(3, 1, r, 2, e);
      s += e == 0 ? "" : " ";
      s += from ? std::to_string(from->first) + "-" + std::to_string(from->last) + ":" +
                      std::to_string(from->index)
                : "-";
    }
  }
  return s;
}

TEST(CollectiveTraits, WhereEveryOutputElementComesFrom) {
  // allreduce (count 2): element e of everyone, reduced, everywhere.
  EXPECT_EQ(sources(CollectiveKind::kAllReduce, 2), "0-3:0 0-3:1 | 0-3:0 0-3:1 | 0-3:0 0-3:1");
  // allgather (count 2, output 6): rank q's input block in block q.
  EXPECT_EQ(sources(CollectiveKind::kAllGather, 6),
            "0-1:0 0-1:1 1-2:0 1-2:1 2-3:0 2-3:1 | 0-1:0 0-1:1 1-2:0 1-2:1 2-3:0 2-3:1 | "
            "0-1:0 0-1:1 1-2:0 1-2:1 2-3:0 2-3:1");
  // reducescatter (count 2, input 6): rank r gets block r reduced.
  EXPECT_EQ(sources(CollectiveKind::kReduceScatter, 2), "0-3:0 0-3:1 | 0-3:2 0-3:3 | 0-3:4 0-3:5");
  // alltoall (count 2 per peer): block q of rank r is block r of rank q.
  EXPECT_EQ(sources(CollectiveKind::kAllToAll, 6),
            "0-1:0 0-1:1 1-2:0 1-2:1 2-3:0 2-3:1 | 0-1:2 0-1:3 1-2:2 1-2:3 2-3:2 2-3:3 | "
            "0-1:4 0-1:5 1-2:4 1-2:5 2-3:4 2-3:5");
  // broadcast from root 1.
  EXPECT_EQ(sources(CollectiveKind::kBroadcast, 2), "1-2:0 1-2:1 | 1-2:0 1-2:1 | 1-2:0 1-2:1");
  // reduce to root 1: only the root's output is asked for.
  EXPECT_EQ(sources(CollectiveKind::kReduce, 2), "- - | 0-3:0 0-3:1 | - -");
  // gather to root 1 (whole vector 6, a share of 2 each).
  EXPECT_EQ(sources(CollectiveKind::kGather, 6),
            "- - - - - - | 0-1:0 0-1:1 1-2:0 1-2:1 2-3:0 2-3:1 | - - - - - -");
  // scatter from root 1: rank r gets share r of the root's input.
  EXPECT_EQ(sources(CollectiveKind::kScatter, 2), "1-2:0 1-2:1 | 1-2:2 1-2:3 | 1-2:4 1-2:5");
  for (CollectiveKind k : {CollectiveKind::kSend, CollectiveKind::kRecv, CollectiveKind::kAllToAllv,
                           CollectiveKind::kCustom})
    EXPECT_EQ(traits(k).source, nullptr) << collectiveName(k);
}

TEST(CollectiveTraits, BuffersInPlaceRulesAndRoots) {
  struct Row {
    CollectiveKind k;
    size_t in, out;  // elements for count 12 on 3 ranks
    InPlace inPlace;
    bool rooted, reduces;
    Ranks reads, writes;
    size_t multiplier;
  };
  const std::vector<Row> rows = {
      {CollectiveKind::kAllReduce, 12, 12, InPlace::kSame, false, true, Ranks::kAll, Ranks::kAll,
       1},
      {CollectiveKind::kAllGather, 12, 36, InPlace::kInputInOutput, false, false, Ranks::kAll,
       Ranks::kAll, 3},
      {CollectiveKind::kReduceScatter, 36, 12, InPlace::kOutputInInput, false, true, Ranks::kAll,
       Ranks::kAll, 3},
      {CollectiveKind::kAllToAll, 36, 36, InPlace::kSame, false, false, Ranks::kAll, Ranks::kAll,
       3},
      {CollectiveKind::kBroadcast, 12, 12, InPlace::kSame, true, false, Ranks::kRoot, Ranks::kAll,
       1},
      {CollectiveKind::kReduce, 12, 12, InPlace::kSame, true, true, Ranks::kAll, Ranks::kRoot, 1},
      {CollectiveKind::kGather, 4, 12, InPlace::kInputInOutput, true, false, Ranks::kAll,
       Ranks::kRoot, 1},
      {CollectiveKind::kScatter, 12, 4, InPlace::kOutputInInput, true, false, Ranks::kRoot,
       Ranks::kAll, 1},
  };
  for (const Row& w : rows) {
    const CollectiveTraits& t = traits(w.k);
    SCOPED_TRACE(std::string(t.name));
    EXPECT_EQ(t.kind, w.k);
    EXPECT_EQ(extentElems(t.input, 12, 3), w.in);
    EXPECT_EQ(extentElems(t.output, 12, 3), w.out);
    EXPECT_EQ(t.inPlace, w.inPlace);
    EXPECT_EQ(t.rooted, w.rooted);
    EXPECT_EQ(isRooted(w.k), w.rooted);
    EXPECT_EQ(t.reduces, w.reduces);
    EXPECT_EQ(t.reads, w.reads);
    EXPECT_EQ(t.writes, w.writes);
    EXPECT_EQ(countMultiplier(w.k, 3), w.multiplier);
    EXPECT_EQ(parseCollective(t.name), w.k);
  }
  EXPECT_EQ(blockElems(CollectiveKind::kGather, 12, 3), 4u);
  EXPECT_EQ(blockElems(CollectiveKind::kAllGather, 12, 3), 12u);
  EXPECT_EQ(busBandwidthFactor(CollectiveKind::kAllReduce, 4), 1.5);
  EXPECT_EQ(busBandwidthFactor(CollectiveKind::kAllGather, 4), 0.75);
  EXPECT_EQ(busBandwidthFactor(CollectiveKind::kBroadcast, 4), 1.0);
  EXPECT_EQ(parseCollective("reduce_scatter"), CollectiveKind::kReduceScatter);
  EXPECT_EQ(parseCollective("allgatherv"), CollectiveKind::kCustom);
  EXPECT_EQ(collectiveName(CollectiveKind::kCustom), "custom");
}

}  // namespace
}  // namespace chorus
