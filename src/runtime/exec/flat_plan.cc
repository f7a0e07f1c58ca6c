#include "runtime/exec/flat_plan.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/check.h"
#include "core/collectives.h"

namespace chorus::runtime {

FlatPlan FlatPlan::lower(const VerifiedAlgorithm& va, int instances) {
  CHORUS_CHECK(instances >= 1 && instances <= kMostInstances,
               "a plan has 1 to kMostInstances instances");
  const ir::Algorithm& a = va.algo();
  FlatPlan p;
  p.nranks = a.ngpus;
  p.instances = instances;
  p.protocol = a.protocol;
  p.collective = a.collective;
  p.root = va.root();
  p.rankFirstBlock.assign(static_cast<size_t>(a.ngpus) + 1, 0);
  p.scratchChunks.assign(static_cast<size_t>(a.ngpus), 0);
  // Blocks in rank order, each rank's by instance, then threadblock id, so a
  // step's dependency (depid within its rank) is
  // rankFirstBlock[r] + instance x (the rank's threadblocks) + depid.
  for (const ir::Rank& r : a.ranks) {
    p.rankFirstBlock[static_cast<size_t>(r.id)] = static_cast<int32_t>(r.tbs.size()) * instances;
    p.scratchChunks[static_cast<size_t>(r.id)] = r.scratchChunks;
  }
  int32_t total = 0;
  for (int r = 0; r <= a.ngpus; ++r) {
    int32_t n = r < a.ngpus ? p.rankFirstBlock[static_cast<size_t>(r)] : 0;
    p.rankFirstBlock[static_cast<size_t>(r)] = total;
    total += n;
  }
  p.blocks.resize(static_cast<size_t>(total));
  std::map<std::tuple<int, int, int, int>, int32_t> connOf;  // (instance, channel, from, to)
  auto conn = [&](int instance, int channel, int from, int to) {
    auto [it, added] =
        connOf.try_emplace({instance, channel, from, to}, static_cast<int32_t>(p.conns.size()));
    if (added) {
      PlanConn c;
      c.instance = instance;
      c.channel = channel;
      c.from = from;
      c.to = to;
      p.conns.push_back(c);
    }
    return it->second;
  };
  for (const ir::Rank& r : a.ranks) {
    const auto ntb = static_cast<int32_t>(r.tbs.size());
    for (int i = 0; i < instances; ++i) {
      const int32_t first = p.rankFirstBlock[static_cast<size_t>(r.id)] + i * ntb;
      for (int32_t t = 0; t < ntb; ++t) {
        const ir::Threadblock& tb = r.tbs[static_cast<size_t>(t)];
        CHORUS_CHECK(tb.id == t, "verified threadblocks are numbered densely");
        int32_t b = first + t;
        PlanBlock& pb = p.blocks[static_cast<size_t>(b)];
        pb.rank = r.id;
        pb.tb = tb.id;
        pb.instance = i;
        pb.firstStep = static_cast<int32_t>(p.steps.size());
        pb.nsteps = static_cast<int32_t>(tb.steps.size());
        pb.maxLag = tb.maxLag();
        int maxSend = 0, maxRecv = 0;
        for (const ir::Step& s : tb.steps) {
          PlanStep ps;
          ps.type = static_cast<uint8_t>(s.type);
          ps.srcBuf = static_cast<uint8_t>(s.srcBuf);
          ps.dstBuf = static_cast<uint8_t>(s.dstBuf);
          ps.srcOff = s.srcOff;
          ps.dstOff = s.dstOff;
          ps.count = s.count;
          ps.lag = s.lag;
          if (s.depTb >= 0) {
            const ir::Threadblock& dep = r.tbs[static_cast<size_t>(s.depTb)];
            ps.depBlock = first + s.depTb;
            ps.depStep = s.depStep;
            ps.depSteps = static_cast<int32_t>(dep.steps.size());
            // (The verifier's E118: a dependency's lag is at most the step's.)
            ps.depBack =
                static_cast<uint16_t>(s.lag - dep.steps[static_cast<size_t>(s.depStep)].lag);
          }
          if (ir::sends(s.type)) maxSend = std::max(maxSend, s.count);
          if (ir::receives(s.type)) maxRecv = std::max(maxRecv, s.count);
          p.steps.push_back(ps);
        }
        if (tb.sendPeer >= 0) {
          pb.sendConn = conn(i, tb.channel, r.id, tb.sendPeer);
          PlanConn& c = p.conns[static_cast<size_t>(pb.sendConn)];
          CHORUS_CHECK(c.sendBlock < 0, "a verified connection has one sender");
          c.sendBlock = b;
          c.maxCount = std::max(c.maxCount, maxSend);
        }
        if (tb.recvPeer >= 0) {
          pb.recvConn = conn(i, tb.channel, tb.recvPeer, r.id);
          PlanConn& c = p.conns[static_cast<size_t>(pb.recvConn)];
          CHORUS_CHECK(c.recvBlock < 0, "a verified connection has one receiver");
          c.recvBlock = b;
          c.maxCount = std::max(c.maxCount, maxRecv);
        }
      }
    }
  }
  return p;
}

void FlatPlan::splitSlices(ir::Slicing* g) const {
  g->splitForInstances(static_cast<size_t>(instances));
}

int FlatPlan::maxCount() const {
  int m = 1;
  for (const PlanConn& c : conns) m = std::max(m, c.maxCount);
  return m;
}

double FlatPlan::bytesMoved(const ir::Slicing& g, ir::Protocol p) const {
  double wire = p == ir::Protocol::kLL ? 2.0 : p == ir::Protocol::kLL128 ? 128.0 / 120.0 : 1.0;
  // Per chunk of one slice: local reads and writes, slot writes and reads.
  auto perChunk = [&](ir::StepType t) -> double {
    switch (t) {
      case ir::StepType::kSend:
        return 1 + wire;  // read src, write the slot
      case ir::StepType::kRecv:
        return wire + 1;  // read the slot, write dst
      case ir::StepType::kRecvCopySend:
        return wire + 1 + wire;
      case ir::StepType::kRecvReduceSend:
        return wire + 1 + wire;
      case ir::StepType::kRecvReduceCopy:
        return wire + 1 + 1;
      case ir::StepType::kRecvReduceCopySend:
        return wire + 1 + 1 + wire;
      case ir::StepType::kCopy:
        return 2;
      case ir::StepType::kReduce:
        return 3;
      case ir::StepType::kNop:
        return 0;
    }
    return 0;
  };
  // Each block runs its instance's iterations: i, i + K, i + 2K, ...
  double total = 0;
  for (const PlanBlock& b : blocks) {
    double perSlice = 0;  // bytes per element of one slice of every chunk the block's steps touch
    for (int32_t k = 0; k < b.nsteps; ++k) {
      const PlanStep& s = steps[static_cast<size_t>(b.firstStep + k)];
      perSlice += perChunk(static_cast<ir::StepType>(s.type)) * s.count;
    }
    if (perSlice == 0) continue;
    for (size_t it = static_cast<size_t>(b.instance); it < g.iterations;
         it += static_cast<size_t>(instances))
      total += perSlice * static_cast<double>(g.sliceLen(it) * g.elemSize);
  }
  return total;
}

bool FlatPlan::dividesOutput(int rank, ReduceOp op) const {
  if (op != ReduceOp::kAvg || !reducesToOutput(collective)) return false;
  return traits(collective).writes == Ranks::kAll || rank == root;
}

}  // namespace chorus::runtime
