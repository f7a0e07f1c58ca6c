// Threadblocks: on each rank, every (channel, peer, direction) belongs to
// one threadblock, and a threadblock has at most one peer each way (docs/spec/IR.md
// section 1). An instruction that receives and sends ties its two
// connections to one threadblock; where that would give a threadblock two
// peers one way (a rank forwarding from one peer to two on one channel),
// the instruction is split again into its receive and its send; so it is
// where the joined threadblock would run more steps than MSCCL's executor
// does (64) and each connection alone would not (a forwarding rank whose
// two connections each carry many messages). A
// threadblock that only sends to P and one that only receives from P on
// the same channel become one, unless that passes the executor's steps
// where each alone does not. Hints (sendTb / recvTb) fix ids; hints that
// put different peers on one threadblock are an error naming both lines.
// Local copies and reductions run on the threadblock of the instruction
// before them. Ids follow first use.
#include <algorithm>
#include <map>
#include <tuple>

#include "compiler/passes.h"
#include "ir/validate.h"

namespace chorus::compiler {

namespace {

struct Group {
  int sendPeer = -1, recvPeer = -1, channel = -1;
  int sendBy = -1, recvBy = -1;  // the instruction that fixed each peer
  int hint = -1, hintBy = -1;
  int first = -1;  // first instruction using it
};

class Groups {
 public:
  int add(Group g) {
    parent_.push_back(static_cast<int>(parent_.size()));
    groups_.push_back(g);
    return static_cast<int>(groups_.size()) - 1;
  }
  int find(int a) {
    while (parent_[static_cast<size_t>(a)] != a)
      a = parent_[static_cast<size_t>(a)] =
          parent_[static_cast<size_t>(parent_[static_cast<size_t>(a)])];
    return a;
  }
  Group& at(int a) { return groups_[static_cast<size_t>(find(a))]; }
  // Joins a and b; false (and nothing changes) if they need two peers one
  // way or two hinted ids. `why` then names the conflicting instructions.
  bool join(int a, int b, int* by, int* other, std::string* why) {
    a = find(a);
    b = find(b);
    if (a == b) return true;
    Group& x = groups_[static_cast<size_t>(a)];
    Group& y = groups_[static_cast<size_t>(b)];
    if (x.sendPeer >= 0 && y.sendPeer >= 0 && x.sendPeer != y.sendPeer) {
      *by = x.sendBy, *other = y.sendBy;
      *why = "send to ranks " + std::to_string(std::min(x.sendPeer, y.sendPeer)) + " and " +
             std::to_string(std::max(x.sendPeer, y.sendPeer));
      return false;
    }
    if (x.recvPeer >= 0 && y.recvPeer >= 0 && x.recvPeer != y.recvPeer) {
      *by = x.recvBy, *other = y.recvBy;
      *why = "receive from ranks " + std::to_string(std::min(x.recvPeer, y.recvPeer)) + " and " +
             std::to_string(std::max(x.recvPeer, y.recvPeer));
      return false;
    }
    if (x.hint >= 0 && y.hint >= 0 && x.hint != y.hint) {
      *by = x.hintBy, *other = y.hintBy;
      *why = "be threadblocks " + std::to_string(x.hint) + " and " + std::to_string(y.hint);
      return false;
    }
    if (x.sendPeer < 0) x.sendPeer = y.sendPeer, x.sendBy = y.sendBy;
    if (x.recvPeer < 0) x.recvPeer = y.recvPeer, x.recvBy = y.recvBy;
    if (x.hint < 0) x.hint = y.hint, x.hintBy = y.hintBy;
    x.first = std::min(x.first, y.first);
    parent_[static_cast<size_t>(b)] = a;
    return true;
  }
  size_t size() const { return groups_.size(); }

 private:
  std::vector<int> parent_;
  std::vector<Group> groups_;
};

// A fused instruction whose two connections cannot share a threadblock
// (its rank forwards from one peer to two, or from two peers to one, on one
// channel) is split again: the receive, then the send right after it.
Instr unfused(Instr& x) {
  using ir::StepType;
  Instr send = x;
  send.type = StepType::kSend;
  send.srcBuf = x.dstBuf;
  send.srcIdx = x.dstIdx;
  send.dstBuf = send.dstIdx = -1;
  send.recvPeer = -1;
  send.hints.recvTb = -1;
  x.type = x.type == StepType::kRecvCopySend ? StepType::kRecv : StepType::kRecvReduceCopy;
  x.sendPeer = -1;
  x.hints.sendTb = -1;
  return send;
}

void assignRank(Mir& m, int rank, DiagnosticList& diags) {
  if (m.ranks[static_cast<size_t>(rank)].empty()) return;  // (a per-rank compile's others)
  std::vector<Instr> xs;  // the rank's instructions, some fused ones split
  Groups g;
  std::map<std::tuple<int, int, int>, int> byConnection;  // (channel, dir, peer)
  std::map<int, int> byHint;                              // tb id -> group
  std::vector<int> groupOf;
  auto conflict = [&](int at, int by, int other, const std::string& why) {
    const Instr& x = xs[static_cast<size_t>(at)];
    std::string lines = "line " + std::to_string(xs[static_cast<size_t>(by)].line);
    if (other >= 0 && other != by)
      lines += " and line " + std::to_string(xs[static_cast<size_t>(other)].line);
    report(diags, DiagCode::kAssignmentConflict, m, x, rank,
           "one threadblock would have to " + why + " (" + lines +
               "): threadblock hints put operations with different peers on one threadblock");
  };
  // The group of threadblock id `hint`, first asked for by instruction i.
  auto hinted = [&](int i, int hint) {
    auto [h, made] = byHint.try_emplace(hint, -1);
    if (made) {
      Group gr;
      gr.hint = hint;
      gr.hintBy = i;
      gr.first = i;
      h->second = g.add(gr);
    }
    return h->second;
  };
  // The group of one connection of instruction i, joined with its hint's.
  auto connection = [&](int i, int dir, int peer, int hint) {
    const Instr& x = xs[static_cast<size_t>(i)];
    auto [it, fresh] = byConnection.try_emplace({x.channel, dir, peer}, -1);
    if (fresh) {
      Group gr;
      gr.channel = x.channel;
      (dir == 0 ? gr.sendPeer : gr.recvPeer) = peer;
      (dir == 0 ? gr.sendBy : gr.recvBy) = i;
      gr.first = i;
      it->second = g.add(gr);
    }
    int id = it->second;
    if (hint >= 0) {
      int by = -1, other = -1;
      std::string why;
      if (!g.join(id, hinted(i, hint), &by, &other, &why)) conflict(i, by, other, why);
    }
    return id;
  };
  std::vector<Instr>& lowered = m.ranks[static_cast<size_t>(rank)];
  // Messages on each connection, and those one instruction receives and
  // sends on a pair of them: the steps of a threadblock joining the pair.
  std::map<std::tuple<int, int, int>, int> onConnection;  // (channel, dir, peer)
  std::map<std::tuple<int, int, int>, int> forwarded;     // (channel, from, to)
  for (const Instr& x : lowered) {
    if (x.dead) continue;
    if (x.sendPeer >= 0) ++onConnection[{x.channel, 0, x.sendPeer}];
    if (x.recvPeer >= 0) ++onConnection[{x.channel, 1, x.recvPeer}];
    if (x.sendPeer >= 0 && x.recvPeer >= 0) ++forwarded[{x.channel, x.recvPeer, x.sendPeer}];
  }
  // Whether a threadblock joining a receive connection from `from` and a
  // send connection to `to`, `shared` of whose messages are one step, would
  // pass the executor's steps where each connection alone would not: then
  // they stay apart (a ring on thousands of ranks is past the limit either
  // way, and keeps its one threadblock).
  auto apartFits = [&](int channel, int from, int to, int shared) {
    const int in = onConnection[{channel, 1, from}], out = onConnection[{channel, 0, to}];
    return in + out - shared > ir::kMscclMaxSteps && std::max(in, out) <= ir::kMscclMaxSteps;
  };
  xs.reserve(static_cast<size_t>(
      std::count_if(lowered.begin(), lowered.end(), [](const Instr& x) { return !x.dead; })));
  groupOf.reserve(xs.capacity());
  for (Instr& in : lowered) {
    if (in.dead) continue;
    xs.push_back(std::move(in));
    groupOf.push_back(-1);
    int i = static_cast<int>(xs.size()) - 1;
    Instr& x = xs.back();
    if (x.sendPeer < 0 && x.recvPeer < 0) {
      // A local copy or reduction runs where its hint says, else beside
      // its neighbours (below).
      const int hint = x.hints.sendTb >= 0 ? x.hints.sendTb : x.hints.recvTb;
      if (hint >= 0) groupOf.back() = hinted(i, hint);
      continue;
    }
    if (x.sendPeer < 0 || x.recvPeer < 0) {
      groupOf.back() = x.sendPeer >= 0 ? connection(i, 0, x.sendPeer, x.hints.sendTb)
                                       : connection(i, 1, x.recvPeer, x.hints.recvTb);
      continue;
    }
    int recv = connection(i, 1, x.recvPeer, x.hints.recvTb);
    // Would its send connection fit the receive's threadblock?
    Group& r = g.at(recv);
    auto known = byConnection.find({x.channel, 0, x.sendPeer});
    int sendHint = known == byConnection.end() ? x.hints.sendTb : g.at(known->second).hint;
    bool fits = (r.sendPeer < 0 || r.sendPeer == x.sendPeer) &&
                (known == byConnection.end() || (g.at(known->second).recvPeer < 0 ||
                                                 g.at(known->second).recvPeer == x.recvPeer)) &&
                (r.hint < 0 || sendHint < 0 || r.hint == sendHint) &&
                (r.hint < 0 || x.hints.sendTb < 0 || r.hint == x.hints.sendTb) &&
                (r.sendPeer == x.sendPeer || r.hint >= 0 || sendHint >= 0 ||
                 !apartFits(x.channel, x.recvPeer, x.sendPeer,
                            forwarded[{x.channel, x.recvPeer, x.sendPeer}]));
    if (!fits) {
      Instr send = unfused(x);
      groupOf.back() = recv;
      xs.push_back(send);
      groupOf.push_back(
          connection(static_cast<int>(xs.size()) - 1, 0, send.sendPeer, send.hints.sendTb));
      continue;
    }
    int send = connection(i, 0, x.sendPeer, x.hints.sendTb);
    int by = -1, other = -1;
    std::string why;
    if (!g.join(recv, send, &by, &other, &why)) conflict(i, by, other, why);
    groupOf.back() = recv;
  }
  // Send-only and receive-only threadblocks with the same peer and channel
  // pair up (fewer threadblocks; MSCCL's executor limits them) unless the
  // program keeps them apart.
  std::map<std::pair<int, int>, std::vector<int>> sendOnly, recvOnly;
  for (size_t k = 0; k < g.size() && m.options.pairThreadblocks; ++k) {
    int root = g.find(static_cast<int>(k));
    if (root != static_cast<int>(k)) continue;
    const Group& gr = g.at(root);
    if (gr.channel < 0 || gr.hint >= 0) continue;
    if (gr.recvPeer < 0) sendOnly[{gr.channel, gr.sendPeer}].push_back(root);
    if (gr.sendPeer < 0) recvOnly[{gr.channel, gr.recvPeer}].push_back(root);
  }
  for (auto& [key, sends] : sendOnly) {
    auto it = recvOnly.find(key);
    if (it == recvOnly.end()) continue;
    // (Not where that would pass the executor's steps and each alone does not.)
    if (apartFits(key.first, key.second, key.second, 0)) continue;
    // Nor where more messages go to the peer than its connection has slots:
    // the joined threadblock could fill them before its first receive, and
    // the peer's the same (E205: twostep_alltoall on 48 ranks of 4 per node
    // sent 12 and hung). Apart, a receive never waits for a slot.
    if (onConnection[{key.first, 0, key.second}] > ir::kMscclSlots) continue;
    for (size_t k = 0; k < sends.size() && k < it->second.size(); ++k) {
      int by = -1, other = -1;
      std::string why;
      g.join(sends[k], it->second[k], &by, &other, &why);  // compatible by construction
    }
  }
  // Ids: hinted groups keep theirs (one group per hint); the others take
  // free ids by first use.
  std::map<int, int> idOf;  // group root -> tb id
  std::vector<int> taken;
  for (size_t k = 0; k < g.size(); ++k) {
    int root = g.find(static_cast<int>(k));
    const Group& gr = g.at(root);
    if (gr.hint < 0 || idOf.count(root) != 0) continue;
    idOf[root] = gr.hint;
    taken.push_back(gr.hint);
  }
  std::vector<std::pair<int, int>> unhinted;  // (first use, root)
  for (size_t k = 0; k < g.size(); ++k) {
    int root = g.find(static_cast<int>(k));
    if (root == static_cast<int>(k) && idOf.count(root) == 0 && g.at(root).channel >= 0)
      unhinted.push_back({g.at(root).first, root});
  }
  std::sort(unhinted.begin(), unhinted.end());
  std::sort(taken.begin(), taken.end());
  int nextId = 0;
  size_t t = 0;
  for (const auto& [first, root] : unhinted) {
    while (t < taken.size() && taken[t] <= nextId) {
      if (taken[t] == nextId) ++nextId;
      ++t;
    }
    idOf[root] = nextId++;
  }
  int count = 0;
  for (const auto& [root, id] : idOf) count = std::max(count, id + 1);
  // Every id below the largest must exist (contiguous ids): hints that skip
  // ids leave empty threadblocks, which emit() writes without steps.
  for (int i = 0; i < static_cast<int>(xs.size()); ++i)
    if (groupOf[static_cast<size_t>(i)] >= 0)
      xs[static_cast<size_t>(i)].tb = idOf[g.find(groupOf[static_cast<size_t>(i)])];
  // Local instructions run with the instruction before them (or after).
  int last = -1;
  for (Instr& x : xs) {
    if (x.dead) continue;
    if (x.tb >= 0)
      last = x.tb;
    else if (last >= 0)
      x.tb = last;
  }
  last = -1;
  for (auto it = xs.rbegin(); it != xs.rend(); ++it) {
    if (it->dead) continue;
    if (it->tb >= 0)
      last = it->tb;
    else
      it->tb = last >= 0 ? last : 0;
  }
  m.tbCount[static_cast<size_t>(rank)] = std::max(count, xs.empty() ? 0 : 1);
  m.ranks[static_cast<size_t>(rank)] = std::move(xs);
}

}  // namespace

void assign(Mir& m, DiagnosticList& diags) {
  m.tbCount.assign(m.ranks.size(), 0);
  for (int r = 0; r < static_cast<int>(m.ranks.size()); ++r) assignRank(m, r, diags);
}

}  // namespace chorus::compiler
