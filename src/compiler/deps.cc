// Dependencies: on each rank, an instruction must follow every earlier one
// (in program order) that wrote a chunk it reads or writes, or read a chunk
// it writes. Within a threadblock order does that; across threadblocks it
// waits for the latest such step of each other threadblock — one
// dependency per threadblock, and none where an earlier step of its own
// threadblock already waited for that step or a later one. The first
// rides on the step itself, each further one on a nop just before it (docs/spec/IR.md
// section 4). Positions count those nops.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "compiler/passes.h"

namespace chorus::compiler {

namespace {

struct ChunkState {
  int writerTb = -1, writerStep = -1;
  std::vector<std::pair<int, int>> readers;  // (tb, step) since the last write
};

class States {
 public:
  ChunkState& at(int buffer, int index) {
    if (v_.size() <= static_cast<size_t>(buffer)) v_.resize(static_cast<size_t>(buffer) + 1);
    auto& b = v_[static_cast<size_t>(buffer)];
    if (b.size() <= static_cast<size_t>(index)) b.resize(static_cast<size_t>(index) + 1);
    return b[static_cast<size_t>(index)];
  }

 private:
  std::vector<std::vector<ChunkState>> v_;
};

// "input chunk 3", "output chunk 0", "scratch 2 chunk 5" (lang buffers).
std::string bufferName(int buffer, int index) {
  const std::string name = buffer == 0   ? "input"
                           : buffer == 1 ? "output"
                                         : "scratch " + std::to_string(buffer - 2);
  return name + " chunk " + std::to_string(index);
}

// With lags (lang::Hints::lag), a threadblock takes one slice's steps in
// the order (lag, position): the step to wait for in another threadblock is
// the last of its hazards in that order, and an earlier wait covers a later
// step only where that step's lag is at least the earlier one's. A hazard on
// a step of a larger lag, in any threadblock, would have the later
// operation move a slice before the earlier one does: a problem, at the
// later operation's line.
void rankDependencies(std::vector<Instr>& xs, int tbs, int rank, DiagnosticList& diags) {
  States states;
  const auto ntb = static_cast<size_t>(std::max(tbs, 1));
  std::vector<int> length(ntb, 0);
  std::vector<std::vector<uint16_t>> lagOf(ntb);  // [tb][step], nops included
  // (lag, step): a threadblock's order for one slice.
  auto key = [&](int tb, int step) {
    return (int64_t{lagOf[static_cast<size_t>(tb)][static_cast<size_t>(step)]} << 32) | step;
  };
  // known[t][u]: (the waiting step's lag, the last of tb u's steps in one
  // slice's order that a step of tb t of that lag has already waited for).
  std::vector<std::unordered_map<int, std::vector<std::pair<int, int64_t>>>> known(ntb);
  for (Instr& x : xs) {
    if (x.dead) continue;
    const int lag = x.hints.lag;
    std::map<int, int64_t> need;  // tb -> its last step to wait for, as key()
    bool reported = false;
    auto wait = [&](int tb, int step, int buffer, int index) {
      if (tb < 0) return;
      const int64_t k = key(tb, step);
      if ((k >> 32) > lag && !reported) {
        reported = true;
        Location loc;
        loc.file = x.file;
        loc.line = x.line;
        loc.column = x.column;
        diags.add(DiagCode::kProgramMisuse, loc,
                  "on rank " + std::to_string(rank) + " this operation (lag " +
                      std::to_string(lag) + ") touches " + bufferName(buffer, index) +
                      " after a step of lag " + std::to_string(k >> 32) +
                      ": it would move each slice before that one does (a lag may not "
                      "decrease along the data's order)");
      }
      if (tb == x.tb) return;
      auto [it, fresh] = need.try_emplace(tb, k);
      if (!fresh) it->second = std::max(it->second, k);
    };
    bool readsSrc = ir::readsSrc(x.type), writes = ir::writesDst(x.type);
    bool readsDst = ir::readsDst(x.type);
    for (int k = 0; k < x.count; ++k) {
      if (readsSrc) {
        const ChunkState& s = states.at(x.srcBuf, x.srcIdx + k);
        wait(s.writerTb, s.writerStep, x.srcBuf, x.srcIdx + k);
      }
      if (writes) {
        const ChunkState& d = states.at(x.dstBuf, x.dstIdx + k);
        wait(d.writerTb, d.writerStep, x.dstBuf, x.dstIdx + k);
        for (const auto& [tb, step] : d.readers) wait(tb, step, x.dstBuf, x.dstIdx + k);
      }
    }
    auto& mine = known[static_cast<size_t>(x.tb)];
    x.deps.clear();
    for (const auto& [tb, k] : need) {
      auto& waited = mine[tb];
      bool covered = false;
      for (const auto& [waiterLag, upTo] : waited) covered |= waiterLag <= lag && upTo >= k;
      if (covered) continue;
      auto it =
          std::find_if(waited.begin(), waited.end(), [&](const auto& e) { return e.first == lag; });
      if (it == waited.end())
        waited.emplace_back(lag, k);
      else
        it->second = std::max(it->second, k);
      x.deps.push_back({tb, static_cast<int>(k & 0xffffffff)});
    }
    size_t extra = x.deps.empty() ? 0 : x.deps.size() - 1;
    int& len = length[static_cast<size_t>(x.tb)];
    x.step = len + static_cast<int>(extra);
    len = x.step + 1;
    lagOf[static_cast<size_t>(x.tb)].resize(static_cast<size_t>(len), static_cast<uint16_t>(lag));
    for (int k = 0; k < x.count; ++k) {
      if (readsSrc) states.at(x.srcBuf, x.srcIdx + k).readers.push_back({x.tb, x.step});
      if (readsDst) states.at(x.dstBuf, x.dstIdx + k).readers.push_back({x.tb, x.step});
      if (writes) {
        ChunkState& d = states.at(x.dstBuf, x.dstIdx + k);
        d.writerTb = x.tb;
        d.writerStep = x.step;
        d.readers.clear();
      }
    }
  }
}

// MSCCL's executor takes dependency targets up to threadblock 127 (docs/spec/IR.md
// section 6). When a rank depends on a higher one, its threadblocks are
// renumbered: those others wait for first, in their order, then the rest;
// ids a hint fixed stay where they are.
void targetsFirst(std::vector<Instr>& xs, int tbs) {
  constexpr int kMostTarget = 127;
  std::vector<char> target(static_cast<size_t>(std::max(tbs, 1)), 0), pinned(target);
  bool over = false;
  for (const Instr& x : xs) {
    if (x.dead) continue;
    for (const auto& [tb, step] : x.deps) {
      target[static_cast<size_t>(tb)] = 1;
      over = over || tb > kMostTarget;
    }
    const bool local = x.sendPeer < 0 && x.recvPeer < 0;
    if ((x.sendPeer >= 0 || local) && x.hints.sendTb >= 0) pinned[static_cast<size_t>(x.tb)] = 1;
    if ((x.recvPeer >= 0 || local) && x.hints.recvTb >= 0) pinned[static_cast<size_t>(x.tb)] = 1;
  }
  if (!over) return;
  std::vector<int> order;  // unpinned tbs: targets, then the others
  for (int pass = 0; pass < 2; ++pass)
    for (int tb = 0; tb < tbs; ++tb)
      if (!pinned[static_cast<size_t>(tb)] && target[static_cast<size_t>(tb)] == (pass == 0))
        order.push_back(tb);
  std::vector<int> id(static_cast<size_t>(tbs));
  size_t next = 0;
  for (int slot = 0; slot < tbs; ++slot) {
    if (pinned[static_cast<size_t>(slot)]) {
      id[static_cast<size_t>(slot)] = slot;
      continue;
    }
    id[static_cast<size_t>(order[next++])] = slot;
  }
  for (Instr& x : xs) {
    if (x.dead) continue;
    x.tb = id[static_cast<size_t>(x.tb)];
    for (auto& [tb, step] : x.deps) tb = id[static_cast<size_t>(tb)];
  }
}

}  // namespace

void dependencies(Mir& m, DiagnosticList& diags) {
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    if (m.ranks[r].empty()) continue;
    rankDependencies(m.ranks[r], m.tbCount[r], static_cast<int>(r), diags);
    targetsFirst(m.ranks[r], m.tbCount[r]);
  }
}

}  // namespace chorus::compiler
