// Mutation testing of the verifier against an independent oracle: random
// single-attribute mutations of real algorithms must never crash it, and no
// mutation it accepts may compute a different result in the reference
// interpreter (every mutation that changes the result is rejected).
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>

#include "ir/xml_reader.h"
#include "ir/xml_writer.h"
#include "tests/support/files.h"
#include "tests/support/reference_interpreter.h"
#include "verify/verifier.h"

namespace chorus::verify {
namespace {

using chorus::testing::Outcome;

struct Tally {
  int total = 0, rejected = 0, accepted = 0, changed = 0, changedAndAccepted = 0, unparsable = 0;
};

// Whether the algorithm computes its collective in every form it claims.
bool computesCorrectly(const ir::Algorithm& a) {
  if (!a.inplace && !a.outofplace) return false;
  for (bool inplace : {true, false}) {
    if (inplace ? !a.inplace : !a.outofplace) continue;
    if (chorus::testing::interpret(a, inplace, 11).outcome != Outcome::kCorrect) return false;
  }
  return true;
}

int pick(std::mt19937_64& rng, int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }

int mutateInt(std::mt19937_64& rng, int v, int hi) {
  switch (pick(rng, 5)) {
    case 0:
      return v + 1;
    case 1:
      return v - 1;
    case 2:
      return -1;
    case 3:
      return 0;
    default:
      return pick(rng, std::max(1, hi));
  }
}

// Changes one attribute of one element of `a`; returns a description.
std::string mutate(ir::Algorithm& a, std::mt19937_64& rng) {
  ir::Rank& r = a.ranks[pick(rng, static_cast<int>(a.ranks.size()))];
  int hi = a.nchunksPerLoop + 2;
  int what = pick(rng, 20);
  if (what == 0) {
    int which = pick(rng, 4);
    int* f[] = {&r.id, &r.inputChunks, &r.outputChunks, &r.scratchChunks};
    *f[which] = mutateInt(rng, *f[which], hi);
    return "gpu attribute";
  }
  if (r.tbs.empty()) return "none";
  ir::Threadblock& tb = r.tbs[pick(rng, static_cast<int>(r.tbs.size()))];
  if (what <= 2) {
    int which = pick(rng, 4);
    int* f[] = {&tb.id, &tb.sendPeer, &tb.recvPeer, &tb.channel};
    *f[which] = mutateInt(rng, *f[which], a.ngpus + 1);
    return "tb attribute";
  }
  if (tb.steps.empty()) return "none";
  ir::Step& s = tb.steps[pick(rng, static_cast<int>(tb.steps.size()))];
  switch (pick(rng, 9)) {
    case 0:
      s.type = static_cast<ir::StepType>(pick(rng, 9));
      return "type";
    case 1:
      s.srcBuf = static_cast<ir::Buffer>(pick(rng, 3));
      return "srcbuf";
    case 2:
      s.srcOff = mutateInt(rng, s.srcOff, hi);
      return "srcoff";
    case 3:
      s.dstBuf = static_cast<ir::Buffer>(pick(rng, 3));
      return "dstbuf";
    case 4:
      s.dstOff = mutateInt(rng, s.dstOff, hi);
      return "dstoff";
    case 5:
      s.count = mutateInt(rng, s.count, 3);
      return "cnt";
    case 6:
      s.depTb = mutateInt(rng, s.depTb, static_cast<int>(r.tbs.size()));
      return "depid";
    case 7:
      s.depStep = mutateInt(rng, s.depStep, 4);
      return "deps";
    default:
      s.hasDep = !s.hasDep;
      return "hasdep";
  }
}

// Replaces one attribute value in the XML text with something odd.
std::string mutateText(const std::string& xml, std::mt19937_64& rng) {
  static const char* kValues[] = {"-1", "0", "1",   "7",   "99999999999", "x",   "",  "i",
                                  "o",  "s", "nop", "rrc", "-2147483649", "1e3", " 3"};
  std::vector<size_t> starts;
  for (size_t p = xml.find("=\""); p != std::string::npos; p = xml.find("=\"", p + 1))
    starts.push_back(p + 2);
  size_t at = starts[static_cast<size_t>(pick(rng, static_cast<int>(starts.size())))];
  size_t end = xml.find('"', at);
  std::string out = xml;
  out.replace(at, end - at, kValues[pick(rng, 15)]);
  return out;
}

void judge(const ir::Algorithm& m, Tally& t) {
  Report rep = verifyAlgorithm(m);  // must not crash (ASan/UBSan builds check more)
  bool changed = !computesCorrectly(m);
  // Accepted = proven correct. A mutant that renames the collective is
  // "unproven" (no errors, semantics not checked), which is not acceptance.
  bool accepted = rep.correct() && rep.semanticsChecked;
  ++t.total;
  if (accepted)
    ++t.accepted;
  else
    ++t.rejected;
  if (changed) ++t.changed;
  if (changed && accepted) {
    ++t.changedAndAccepted;
    ADD_FAILURE() << "accepted a mutation that computes a wrong result:\n" << ir::writeXml(m);
  }
}

TEST(Mutation, VerifierRejectsEveryMutationThatChangesTheResult) {
  std::vector<ir::Algorithm> bases;
  for (const auto& f : chorus::testing::productionFiles())
    bases.push_back(chorus::testing::mustRead(f));
  for (const auto& f : chorus::testing::sourceFiles("tests/data", ".xml"))
    bases.push_back(chorus::testing::mustRead(f));
  for (const auto& f : chorus::testing::sourceFiles("examples/algorithms", ".xml")) {
    ir::Algorithm a = chorus::testing::mustRead(f);
    if (a.collective != CollectiveKind::kBroadcast) bases.push_back(std::move(a));
  }
  for (const auto& b : bases) ASSERT_TRUE(computesCorrectly(b)) << b.sourceFile;

  int n = 3000;
  if (const char* env = std::getenv("CHORUS_MUTATIONS")) n = std::atoi(env);
  std::mt19937_64 rng(20261122);
  Tally ir, text;
  for (int i = 0; i < n; ++i) {
    const ir::Algorithm& base =
        bases[static_cast<size_t>(pick(rng, static_cast<int>(bases.size())))];
    if (i % 4 == 3) {
      // Through the reader: a mangled attribute value.
      ir::ReadResult rr = ir::readXml(mutateText(ir::writeXml(base), rng), "mutant.xml");
      if (!rr.algorithm) {
        ++text.unparsable;
        continue;
      }
      if (*rr.algorithm == base) continue;
      judge(*rr.algorithm, text);
      continue;
    }
    ir::Algorithm m = base;
    mutate(m, rng);
    if (m == base) continue;  // e.g. x -> x
    judge(m, ir);
  }
  for (auto [name, t] : {std::pair{"ir", ir}, std::pair{"text", text}}) {
    std::cout << "mutations (" << name << "): " << t.total << " judged, " << t.rejected
              << " rejected, " << t.accepted << " accepted; " << t.changed
              << " changed the result, all rejected: " << (t.changedAndAccepted == 0 ? "yes" : "NO")
              << "; " << t.unparsable << " did not parse\n";
    RecordProperty(std::string(name) + "_judged", t.total);
    RecordProperty(std::string(name) + "_changed", t.changed);
  }
  // The corpus must exercise both outcomes, or the test proves nothing.
  EXPECT_GT(ir.changed, n / 4);
  EXPECT_GT(ir.accepted, 0);
}

}  // namespace
}  // namespace chorus::verify
