// MSCCL executor limits (docs/spec/IR.md section 6): correct algorithms past a limit
// verify with a warning by default and fail with --target msccl.
#include <gtest/gtest.h>

#include "ir/validate.h"
#include "verify/verifier.h"

namespace chorus::verify {
namespace {

using ir::Buffer;
using ir::Step;
using ir::StepType;

Step step(StepType t, Buffer sb, int so, Buffer db, int dob, int cnt) {
  Step s;
  s.type = t;
  s.srcBuf = sb;
  s.srcOff = so;
  s.dstBuf = db;
  s.dstOff = dob;
  s.count = cnt;
  return s;
}

// All-pairs alltoall on n ranks: `per` chunks per peer, moved in steps of
// `cnt` chunks, on `nchannels` channels (tbs use channel 0).
ir::Algorithm allPairs(int n, int per, int cnt, int nchannels = 1) {
  ir::Algorithm a;
  a.name = "limits";
  a.collective = CollectiveKind::kAllToAll;
  a.collectiveName = "alltoall";
  a.ngpus = n;
  a.nchannels = nchannels;
  a.nchunksPerLoop = n * per;
  a.inplace = false;
  a.outofplace = true;
  for (int r = 0; r < n; ++r) {
    ir::Rank rank;
    rank.id = r;
    rank.inputChunks = rank.outputChunks = n * per;
    for (int p = 0; p < n; ++p) {
      ir::Threadblock tb;
      tb.id = static_cast<int>(rank.tbs.size());
      if (p == r) {
        tb.steps.push_back(
            step(StepType::kCopy, Buffer::kInput, r * per, Buffer::kOutput, r * per, per));
      } else {
        tb.sendPeer = tb.recvPeer = p;
        // Each send, then its receive: no send ever waits for a slot (all
        // sends first would, past 8 of them: E205).
        for (int k = 0; k < per; k += cnt) {
          tb.steps.push_back(
              step(StepType::kSend, Buffer::kInput, p * per + k, Buffer::kOutput, -1, cnt));
          tb.steps.push_back(
              step(StepType::kRecv, Buffer::kInput, -1, Buffer::kOutput, p * per + k, cnt));
        }
      }
      rank.tbs.push_back(std::move(tb));
    }
    a.ranks.push_back(std::move(rank));
  }
  return a;
}

std::set<DiagCode> codes(const Report& r) {
  std::set<DiagCode> out;
  for (const auto& d : r.diagnostics.items()) out.insert(d.code);
  return out;
}

void expectOnlyLimit(const ir::Algorithm& a, std::set<DiagCode> want) {
  Report lax = verifyAlgorithm(a);
  EXPECT_TRUE(lax.correct());
  EXPECT_TRUE(lax.forms[0].proven);
  EXPECT_EQ(codes(lax), want);
  for (const auto& d : lax.diagnostics.items()) EXPECT_EQ(d.severity, Severity::kWarning);
  Options strict;
  strict.targetMscclExecutor = true;
  Report s = verifyAlgorithm(a, strict);
  EXPECT_FALSE(s.correct());
  EXPECT_EQ(codes(s), want);
}

TEST(Limits, BaselineHasNoWarnings) {
  Report r = verifyAlgorithm(allPairs(3, 2, 1));
  EXPECT_TRUE(r.correct());
  EXPECT_TRUE(r.diagnostics.empty());
}

TEST(Limits, Channels) { expectOnlyLimit(allPairs(2, 1, 1, 33), {DiagCode::kLimitChannels}); }

TEST(Limits, ThreadblocksPerChannel) {
  expectOnlyLimit(allPairs(34, 1, 1), {DiagCode::kLimitTbsPerChannel});
}

TEST(Limits, Count) { expectOnlyLimit(allPairs(2, 72, 72), {DiagCode::kLimitCount}); }

TEST(Limits, Offset) {
  // Each rank receives into scratch chunk 40000, then copies it to the output.
  ir::Algorithm a = allPairs(2, 1, 1);
  for (ir::Rank& r : a.ranks) {
    r.scratchChunks = 40001;
    ir::Threadblock& tb = r.tbs[r.id == 0 ? 1 : 0];
    int peer = tb.recvPeer;
    tb.steps[1].dstBuf = Buffer::kScratch;
    tb.steps[1].dstOff = 40000;
    tb.steps.push_back(step(StepType::kCopy, Buffer::kScratch, 40000, Buffer::kOutput, peer, 1));
  }
  expectOnlyLimit(a, {DiagCode::kLimitOffset});
}

TEST(Limits, StepsPerThreadblock) {
  expectOnlyLimit(allPairs(2, 33, 1), {DiagCode::kLimitSteps});  // 66 steps
}

TEST(Limits, DependencyThreadblockId) {
  ir::Algorithm a = allPairs(2, 1, 1);
  // Rank 0: move the receive to tb 130 and make the local copy wait for it.
  ir::Rank& r0 = a.ranks[0];
  ir::Step recv = r0.tbs[1].steps[1];
  recv.hasDep = true;
  r0.tbs[1].steps.pop_back();
  r0.tbs[1].recvPeer = -1;
  while (r0.tbs.size() < 130) {
    ir::Threadblock idle;
    idle.id = static_cast<int>(r0.tbs.size());
    r0.tbs.push_back(idle);
  }
  ir::Threadblock t;
  t.id = 130;
  t.recvPeer = 1;
  t.steps.push_back(recv);
  r0.tbs.push_back(t);
  r0.tbs[0].steps[0].depTb = 130;
  r0.tbs[0].steps[0].depStep = 0;
  expectOnlyLimit(a, {DiagCode::kLimitDepTb});
}

TEST(Limits, RepeatedFindingsAreFolded) {
  Report r = verifyAlgorithm(allPairs(3, 72, 72));
  size_t n = 0;
  for (const auto& d : r.diagnostics.items()) {
    if (d.code != DiagCode::kLimitCount) continue;
    ++n;
    // 3 ranks x (2 sends + 2 receives + 1 copy) = 15 steps with cnt=72.
    EXPECT_NE(d.message.find("(and 14 more on 3 rank(s))"), std::string::npos) << d.message;
  }
  EXPECT_EQ(n, 1u);
}

}  // namespace
}  // namespace chorus::verify
