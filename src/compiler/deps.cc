// Dependencies: on each rank, an instruction must follow every earlier one
// (in program order) that wrote a chunk it reads or writes, or read a chunk
// it writes. Within a threadblock order does that; across threadblocks it
// waits for the latest such step of each other threadblock — one
// dependency per threadblock, and none where an earlier step of its own
// threadblock already waited for that step or a later one. The first
// rides on the step itself, each further one on a nop just before it (docs/spec/IR.md
// section 4). Positions count those nops.
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

void rankDependencies(std::vector<Instr>& xs, int tbs) {
  States states;
  std::vector<int> length(static_cast<size_t>(std::max(tbs, 1)), 0);
  // known[t][u]: the latest step of tb u that tb t has already waited for
  // (a later step of t needs no dependency on u up to there).
  std::vector<std::unordered_map<int, int>> known(static_cast<size_t>(std::max(tbs, 1)));
  for (Instr& x : xs) {
    if (x.dead) continue;
    std::map<int, int> need;  // tb -> latest step
    auto wait = [&](int tb, int step) {
      if (tb < 0 || tb == x.tb) return;
      int& s = need.try_emplace(tb, -1).first->second;
      s = std::max(s, step);
    };
    bool readsSrc = ir::readsSrc(x.type), writes = ir::writesDst(x.type);
    bool readsDst = ir::readsDst(x.type);
    for (int k = 0; k < x.count; ++k) {
      if (readsSrc) {
        const ChunkState& s = states.at(x.srcBuf, x.srcIdx + k);
        wait(s.writerTb, s.writerStep);
      }
      if (writes) {
        const ChunkState& d = states.at(x.dstBuf, x.dstIdx + k);
        wait(d.writerTb, d.writerStep);
        for (const auto& [tb, step] : d.readers) wait(tb, step);
      }
    }
    auto& mine = known[static_cast<size_t>(x.tb)];
    x.deps.clear();
    for (const auto& [tb, step] : need) {
      auto [it, fresh] = mine.try_emplace(tb, step);
      if (!fresh && it->second >= step) continue;
      it->second = step;
      x.deps.push_back({tb, step});
    }
    size_t extra = x.deps.empty() ? 0 : x.deps.size() - 1;
    int& len = length[static_cast<size_t>(x.tb)];
    x.step = len + static_cast<int>(extra);
    len = x.step + 1;
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

void dependencies(Mir& m) {
  for (size_t r = 0; r < m.ranks.size(); ++r) {
    if (m.ranks[r].empty()) continue;
    rankDependencies(m.ranks[r], m.tbCount[r]);
    targetsFirst(m.ranks[r], m.tbCount[r]);
  }
}

}  // namespace chorus::compiler
