#include "ir/stats.h"

#include <algorithm>

namespace chorus::ir {

AlgorithmStats computeStats(const Algorithm& algo) {
  AlgorithmStats st;
  for (const Rank& r : algo.ranks) {
    RankStats rs;
    rs.threadblocks = static_cast<int>(r.tbs.size());
    for (const Threadblock& tb : r.tbs) {
      rs.channels.insert(tb.channel);
      if (tb.sendPeer >= 0) rs.sendPeers.insert(tb.sendPeer);
      if (tb.recvPeer >= 0) rs.recvPeers.insert(tb.recvPeer);
      rs.steps += static_cast<int>(tb.steps.size());
      st.maxStepsPerTb = std::max(st.maxStepsPerTb, static_cast<int>(tb.steps.size()));
      for (const Step& s : tb.steps) {
        ++rs.stepsByType[static_cast<size_t>(s.type)];
        if (sends(s.type) && tb.sendPeer >= 0) st.chunksPerLink[{r.id, tb.sendPeer}] += s.count;
      }
    }
    st.maxTbsPerRank = std::max(st.maxTbsPerRank, rs.threadblocks);
    st.ranks.push_back(std::move(rs));
  }
  return st;
}

}  // namespace chorus::ir
