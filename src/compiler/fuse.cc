// Fusion, per rank in program order: a receive (r, rrc) whose chunks a later
// send forwards unchanged becomes one instruction (rcs, rrcs) at the
// receive's place, when nothing writes those chunks in between, no other
// send to that peer on that channel comes in between (that would reorder
// the messages the peer matches by position), and both use one channel.
// Then, backwards: an rrcs whose result lands in scratch that nothing reads
// again becomes rrs (the result is only sent on).
#include <map>

#include "compiler/passes.h"

namespace chorus::compiler {

namespace {

bool isScratch(int buffer) { return buffer >= 2; }

void storeLessRank(std::vector<Instr>& xs) {
  using ir::StepType;
  PerChunk<char> live(0);  // read later (before a write); scratch starts dead
  auto isLive = [&](int b, int k) { return !isScratch(b) || live.at(b, k) != 0; };
  for (auto it = xs.rbegin(); it != xs.rend(); ++it) {
    Instr& x = *it;
    if (x.dead) continue;
    if (x.type == StepType::kRecvReduceCopySend && isScratch(x.dstBuf)) {
      bool used = false;
      for (int k = 0; k < x.count && !used; ++k) used = isLive(x.dstBuf, x.dstIdx + k);
      if (!used) {
        x.type = StepType::kRecvReduceSend;  // dst kept: assign may split it again
      }
    }
    if (ir::writesDst(x.type) && isScratch(x.dstBuf))
      for (int k = 0; k < x.count; ++k) live.at(x.dstBuf, x.dstIdx + k) = 0;
    if (ir::readsSrc(x.type) && isScratch(x.srcBuf))
      for (int k = 0; k < x.count; ++k) live.at(x.srcBuf, x.srcIdx + k) = 1;
    if (ir::readsDst(x.type) && isScratch(x.dstBuf))
      for (int k = 0; k < x.count; ++k) live.at(x.dstBuf, x.dstIdx + k) = 1;
  }
}

}  // namespace

bool Fusion::forwards(std::vector<Instr>& xs, int i) {
  using ir::StepType;
  Instr& x = xs[static_cast<size_t>(i)];
  if (x.type == StepType::kSend) {
    int r = pending_.at(x.srcBuf, x.srcIdx);
    bool ok = r >= 0;
    if (ok) {
      const Instr& rx = xs[static_cast<size_t>(r)];
      ok = rx.dstBuf == x.srcBuf && rx.dstIdx == x.srcIdx && rx.count == x.count &&
           rx.channel == x.channel && rx.hints.lag == x.hints.lag;
      for (int k = 0; ok && k < x.count; ++k) ok = pending_.at(x.srcBuf, x.srcIdx + k) == r;
      auto it = lastSend_.find({x.sendPeer, x.channel});
      ok = ok && (it == lastSend_.end() || it->second < r);
    }
    if (!ok) {
      lastSend_[{x.sendPeer, x.channel}] = i;
      return false;
    }
    Instr& rx = xs[static_cast<size_t>(r)];
    rx.type = rx.type == StepType::kRecv ? StepType::kRecvCopySend : StepType::kRecvReduceCopySend;
    rx.sendPeer = x.sendPeer;
    rx.hints.sendTb = x.hints.sendTb;
    for (int k = 0; k < x.count; ++k) pending_.at(x.srcBuf, x.srcIdx + k) = -1;
    lastSend_[{x.sendPeer, x.channel}] = r;
    return true;
  }
  if (!ir::writesDst(x.type)) return false;
  bool fusable = x.type == StepType::kRecv || x.type == StepType::kRecvReduceCopy;
  for (int k = 0; k < x.count; ++k) pending_.at(x.dstBuf, x.dstIdx + k) = fusable ? i : -1;
  return false;
}

void fuse(Mir& m) {
  for (auto& xs : m.ranks) {
    if (!m.fuseWhileLowering) {
      Fusion fusion;
      for (int i = 0; i < static_cast<int>(xs.size()); ++i)
        if (fusion.forwards(xs, i)) xs[static_cast<size_t>(i)].dead = true;
    }
    storeLessRank(xs);
  }
}

}  // namespace chorus::compiler
