#include <gtest/gtest.h>

#include <map>

#include "ir/ir.h"
#include "tests/support/files.h"

namespace chorus::ir {
namespace {

using chorus::testing::baseName;
using chorus::testing::mustRead;
using chorus::testing::productionFiles;

// The synthesizer takes the search's simulation for the schedule it proves
// where the digests agree: a digest must tell apart what the simulator
// reads, and not what it does not (the size range, provenance).
TEST(ContentDigest, TellsApartEveryFieldTheSimulatorReads) {
  const std::vector<std::string> files = productionFiles();
  ASSERT_FALSE(files.empty());
  Algorithm a = mustRead(files.front());
  const uint64_t d = contentDigest(a);
  Algorithm same = mustRead(files.front());
  EXPECT_EQ(contentDigest(same), d);
  same.minBytes = 1024;
  same.maxBytes = 1 << 20;
  same.sourceFile = "elsewhere.xml";
  EXPECT_EQ(contentDigest(same), d);

  auto differs = [&](const char* what, auto change) {
    Algorithm b = a;
    change(b);
    EXPECT_NE(contentDigest(b), d) << what;
  };
  differs("name", [](Algorithm& b) { b.name += "x"; });
  differs("protocol", [](Algorithm& b) {
    b.protocol = b.protocol == Protocol::kLL ? Protocol::kSimple : Protocol::kLL;
  });
  differs("nchannels", [](Algorithm& b) { ++b.nchannels; });
  differs("nchunksperloop", [](Algorithm& b) { ++b.nchunksPerLoop; });
  differs("inplace", [](Algorithm& b) { b.inplace = !b.inplace; });
  differs("slice", [](Algorithm& b) { b.sliceBytes = 64 << 10; });
  differs("chunks", [](Algorithm& b) { ++b.ranks.front().scratchChunks; });
  differs("tb channel", [](Algorithm& b) { ++b.ranks.front().tbs.front().channel; });
  differs("tb peer", [](Algorithm& b) { ++b.ranks.front().tbs.front().sendPeer; });
  differs("a step less", [](Algorithm& b) { b.ranks.front().tbs.front().steps.pop_back(); });
  auto step = [](Algorithm& b) -> Step& { return b.ranks.back().tbs.back().steps.back(); };
  differs("count", [&](Algorithm& b) { ++step(b).count; });
  differs("src offset", [&](Algorithm& b) { ++step(b).srcOff; });
  differs("dst offset", [&](Algorithm& b) { ++step(b).dstOff; });
  differs("dependency", [&](Algorithm& b) { ++step(b).depStep; });
  differs("hasdep", [&](Algorithm& b) { step(b).hasDep = !step(b).hasDep; });
  differs("lag", [&](Algorithm& b) { step(b).lag = 3; });
  differs("type", [&](Algorithm& b) {
    step(b).type = step(b).type == StepType::kNop ? StepType::kSend : StepType::kNop;
  });
  differs("buffer", [&](Algorithm& b) {
    step(b).dstBuf = step(b).dstBuf == Buffer::kScratch ? Buffer::kOutput : Buffer::kScratch;
  });
  // Two steps swapped: the same fields, in another order.
  differs("order", [](Algorithm& b) {
    for (Rank& r : b.ranks)
      for (Threadblock& tb : r.tbs)
        for (size_t i = 1; i < tb.steps.size(); ++i)
          if (!(tb.steps[i] == tb.steps[0])) {
            std::swap(tb.steps[0], tb.steps[i]);
            return;
          }
  });
  // Production files share a digest only where they are one algorithm for
  // other size ranges (ag-8m.xml and its siblings).
  std::map<uint64_t, Algorithm> seen;
  for (const std::string& path : files) {
    SCOPED_TRACE(baseName(path));
    Algorithm b = mustRead(path);
    b.minBytes = b.maxBytes = 0;
    auto [it, fresh] = seen.try_emplace(contentDigest(b), b);
    if (!fresh) {
      EXPECT_EQ(it->second, b);
    }
  }
}

}  // namespace
}  // namespace chorus::ir
