#include "api/staging.h"

#include <algorithm>

#include "core/collectives.h"

namespace chorus::api {

Extents extents(const Op& op, int rank, int nranks) {
  const size_t c = op.args.count * dataTypeSize(op.args.type);
  const bool root = op.root == rank;
  switch (op.kind) {
    case Op::Kind::kSend:
      return {c, 0, true, false};
    case Op::Kind::kRecv:
      return {0, c, false, true};
    case Op::Kind::kCollective:
      break;
  }
  const CollectiveTraits& t = traits(op.collective);
  return {extentElems(t.input, c, nranks), extentElems(t.output, c, nranks),
          t.reads == Ranks::kAll || root, t.writes == Ranks::kAll || root};
}

StagingPlan planStaging(const std::vector<Op>& ops, int rank, int nranks) {
  struct Span {
    unsigned char* p;
    size_t bytes;
    bool in, out;
    size_t op;
    bool send;
  };
  std::vector<Span> spans;
  for (size_t i = 0; i < ops.size(); ++i) {
    Extents e = extents(ops[i], rank, nranks);
    auto* snd = static_cast<unsigned char*>(const_cast<void*>(ops[i].args.sendbuff));
    auto* rcv = static_cast<unsigned char*>(ops[i].args.recvbuff);
    if (snd != nullptr && e.send > 0) spans.push_back({snd, e.send, e.reads, false, i, true});
    if (rcv != nullptr && e.recv > 0) spans.push_back({rcv, e.recv, false, e.writes, i, false});
  }
  std::stable_sort(spans.begin(), spans.end(),
                   [](const Span& x, const Span& y) { return x.p < y.p; });
  StagingPlan plan;
  plan.where.resize(ops.size());
  for (size_t k = 0; k < spans.size();) {
    unsigned char* lo = spans[k].p;
    unsigned char* hi = lo + spans[k].bytes;
    bool in = spans[k].in, out = spans[k].out;
    size_t end = k + 1;
    for (; end < spans.size() && spans[end].p < hi; ++end) {
      hi = std::max(hi, spans[end].p + spans[end].bytes);
      in = in || spans[end].in;
      out = out || spans[end].out;
    }
    if (end - k > 1) in = true;
    plan.regions.push_back({lo, static_cast<size_t>(hi - lo), in, out});
    int region = static_cast<int>(plan.regions.size()) - 1;
    for (; k < end; ++k) {
      StagingPlan::Where& w = plan.where[spans[k].op];
      size_t off = static_cast<size_t>(spans[k].p - lo);
      if (spans[k].send) {
        w.sendRegion = region;
        w.sendOff = off;
      } else {
        w.recvRegion = region;
        w.recvOff = off;
      }
    }
  }
  return plan;
}

}  // namespace chorus::api
