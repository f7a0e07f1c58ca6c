#include "runtime/driver.h"

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <tuple>

#include "runtime/local_transport.h"
#include "runtime/reduce.h"

namespace chorus::runtime {

namespace {

bool reducesToOutput(CollectiveKind k) {
  return k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter ||
         k == CollectiveKind::kReduce;
}

}  // namespace

Status runDeterministic(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls,
                        const DeterministicOptions& options) {
  const ir::Algorithm& a = va.algo();
  Result<Geometry> plan = planCall(va, calls, options.sliceBytes);
  if (!plan.isOk()) return plan.status();
  const Geometry& g = plan.value();
  ReduceOp op = calls[0].op;
  if (op == ReduceOp::kAvg && !reducesToOutput(a.collective)) {
    return Status(StatusCode::kInvalidArgument,
                  "avg needs a reducing collective, not " + a.collectiveName);
  }
  if (options.slots < 1) return Status(StatusCode::kInvalidArgument, "slots must be >= 1");

  // One connection per (channel, sender, receiver), sized for the largest
  // message any step sends on it in one iteration.
  using Key = std::tuple<int, int, int>;
  std::map<Key, size_t> largest;
  size_t sliceChunkBytes = std::min(g.sliceElems, g.chunkElems) * g.elemSize;
  for (const ir::Rank& r : a.ranks)
    for (const ir::Threadblock& tb : r.tbs)
      for (const ir::Step& s : tb.steps)
        if (ir::sends(s.type)) {
          size_t& l = largest[{tb.channel, r.id, tb.sendPeer}];
          l = std::max(l, static_cast<size_t>(s.count) * sliceChunkBytes);
        }
  std::map<Key, std::unique_ptr<LocalConnection>> conns;
  for (const auto& [key, bytes] : largest)
    conns[key] = std::make_unique<LocalConnection>(options.slots, bytes);

  std::vector<std::vector<unsigned char>> scratch(a.ranks.size());
  std::vector<std::unique_ptr<RankExecutor>> ranks;
  for (const ir::Rank& r : a.ranks) {
    std::vector<SendPort*> sendPorts;
    std::vector<RecvPort*> recvPorts;
    for (const ir::Threadblock& tb : r.tbs) {
      auto s = conns.find({tb.channel, r.id, tb.sendPeer});
      auto v = conns.find({tb.channel, tb.recvPeer, r.id});
      sendPorts.push_back(tb.sendPeer >= 0 && s != conns.end() ? &s->second->sender() : nullptr);
      recvPorts.push_back(tb.recvPeer >= 0 && v != conns.end() ? &v->second->receiver() : nullptr);
    }
    scratch[static_cast<size_t>(r.id)].resize(static_cast<size_t>(r.scratchChunks) * g.chunkElems *
                                              g.elemSize);
    ranks.push_back(std::make_unique<RankExecutor>(va, r.id, calls[static_cast<size_t>(r.id)], g,
                                                   std::move(sendPorts), std::move(recvPorts),
                                                   scratch[static_cast<size_t>(r.id)].data()));
  }

  std::vector<int> order(ranks.size());
  std::iota(order.begin(), order.end(), 0);
  if (options.order == DeterministicOptions::Order::kReverse)
    std::reverse(order.begin(), order.end());
  std::mt19937_64 rng(options.seed);
  for (;;) {
    if (options.order == DeterministicOptions::Order::kRandom)
      std::shuffle(order.begin(), order.end(), rng);
    bool moved = false, allDone = true;
    for (int r : order) {
      RankExecutor& x = *ranks[static_cast<size_t>(r)];
      moved = (x.advance() == Progress::kProgress) || moved;
      allDone = allDone && x.done();
    }
    if (allDone) break;
    if (!moved) {
      std::string msg = "no rank can make progress (" + std::to_string(options.slots) +
                        " slot(s) per connection):";
      for (size_t r = 0; r < ranks.size(); ++r)
        for (const std::string& w : ranks[r]->waiting())
          msg += "\n  rank " + std::to_string(r) + " " + w;
      return Status(StatusCode::kDeadlock, msg);
    }
  }

  if (op == ReduceOp::kAvg) {
    size_t outElems = calls[0].count;  // allreduce, reduce and reducescatter outputs
    for (int r = 0; r < a.ngpus; ++r) {
      if (a.collective == CollectiveKind::kReduce && r != va.root()) continue;
      divideInPlace(calls[0].type, calls[static_cast<size_t>(r)].recvbuff, outElems, a.ngpus);
    }
  }
  return Status::ok();
}

}  // namespace chorus::runtime
