#include "runtime/exec/executor.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/check.h"
#include "core/failpoint.h"
#include "runtime/exec/reduce.h"
#include "runtime/transport/shared_buffers.h"

namespace chorus::runtime {

using ir::Buffer;
using ir::StepType;

namespace {

// A message's mark (SendPort::commit): the call's signature in the top
// byte (its type and, where the algorithm reduces, its operation), and the
// slice iterations left in the call, this one included, below. Ranks whose
// calls differ in count differ in one or the other (or in the message's
// bytes) at the first message that shows it, not a call later: a rank
// whose chunks end on a slice boundary sends messages as long as those of a
// rank whose chunks run on.
constexpr int kMarkSignatureShift = 24;
constexpr uint32_t kMarkLeftMask = (uint32_t{1} << kMarkSignatureShift) - 1;

uint32_t markSignature(const CallArgs& c, bool reduces) {
  uint32_t op = reduces ? static_cast<uint32_t>(c.op) : 0;
  return static_cast<uint32_t>(c.type) << 4 | op;
}

uint32_t messageMark(uint32_t signature, size_t slicesLeft) {
  return signature << kMarkSignatureShift | (static_cast<uint32_t>(slicesLeft) & kMarkLeftMask);
}

// "fp32, sum" for a signature (the operation only where it matters).
std::string describeSignature(uint32_t signature, bool reduces) {
  uint32_t type = signature >> 4, op = signature & 0xF;
  std::string out = type < static_cast<uint32_t>(kNumDataTypes)
                        ? std::string(dataTypeName(static_cast<DataType>(type)))
                        : "type " + std::to_string(type);
  if (!reduces) return out;
  return out + ", " +
         (op < static_cast<uint32_t>(kNumReduceOps)
              ? std::string(reduceOpName(static_cast<ReduceOp>(op)))
              : "operation " + std::to_string(op));
}

}  // namespace

Result<std::shared_ptr<const VerifiedAlgorithm>> VerifiedAlgorithm::make(ir::Algorithm algo) {
  verify::Report report = verify::verifyAlgorithm(algo);
  if (!report.correct()) {
    std::string first;
    for (const auto& d : report.diagnostics.items()) {
      if (d.severity == Severity::kError) {
        first = d.format();
        break;
      }
    }
    return Status(StatusCode::kInvalidArgument,
                  "the verifier rejects '" + algo.name + "': " + first);
  }
  auto va = std::make_shared<VerifiedAlgorithm>();
  va->algo_ = std::move(algo);
  va->root_ = report.root;
  DiagnosticList none;  // the verifier has already reported on this graph
  // A message may go by reference where no write of the same slice can
  // come between: with lags, in one slice's order, not the file's.
  if (ir::hasLags(va->algo_))
    va->sliceAlgo_ =
        std::make_unique<ir::Algorithm>(ir::sliceOrder(va->algo_, &va->slicePosition_));
  va->graph_ =
      std::make_unique<verify::StepGraph>(va->sliceAlgo_ ? *va->sliceAlgo_ : va->algo_, none);
  return std::shared_ptr<const VerifiedAlgorithm>(std::move(va));
}

std::shared_ptr<const VerifiedAlgorithm> VerifiedAlgorithm::part(int rank) const {
  CHORUS_CHECK(part_ < 0 && graph_ != nullptr, "part() of a part");
  CHORUS_CHECK(rank >= 0 && rank < algo_.ngpus, "part() of a rank the algorithm does not have");
  auto p = std::make_shared<VerifiedAlgorithm>();
  // The header and every rank's id and chunk counts; one rank's threadblocks.
  p->algo_ = algo_;
  for (ir::Rank& r : p->algo_.ranks)
    if (r.id != rank) r.tbs = {};
  p->root_ = root_;
  p->part_ = rank;
  for (bool inplace : {false, true})
    p->plans_[{rank, inplace}] = std::make_unique<RefPlan>(refPlan(rank, inplace));
  return p;
}

std::shared_ptr<const VerifiedAlgorithm> VerifiedAlgorithm::fromFamily(ir::Algorithm part, int rank,
                                                                       int root,
                                                                       std::string basis) {
  CHORUS_CHECK(rank >= 0 && rank < part.ngpus && !basis.empty() && !ir::hasLags(part),
               "fromFamily: bad arguments");
  for (const ir::Rank& r : part.ranks)
    CHORUS_CHECK(r.id == rank || r.tbs.empty(), "fromFamily: not one rank's part");
  auto p = std::make_shared<VerifiedAlgorithm>();
  p->algo_ = std::move(part);
  p->root_ = isRooted(p->algo_.collective) ? root : -1;
  p->part_ = rank;
  p->basis_ = std::move(basis);
  // The rank's own happens-before order only: its sends and receives match
  // nothing here, so no path leaves the rank.
  DiagnosticList ignored;
  verify::StepGraph local(p->algo_, ignored);
  for (bool inplace : {false, true})
    p->plans_[{rank, inplace}] =
        std::make_unique<RefPlan>(planReferences(p->algo_, local, rank, inplace));
  return p;
}

const RefPlan& VerifiedAlgorithm::refPlan(int rank, bool inplace) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find({rank, inplace});
  if (it != plans_.end()) return *it->second;
  CHORUS_CHECK(part_ < 0, "a part's plan asked for another rank");
  auto plan = std::make_unique<RefPlan>();
  if (sliceAlgo_ == nullptr) {
    *plan = planReferences(algo_, *graph_, rank, inplace);
  } else {
    const RefPlan inSlice = planReferences(*sliceAlgo_, *graph_, rank, inplace);
    const auto& at = slicePosition_[static_cast<size_t>(rank)];
    plan->kinds.resize(inSlice.kinds.size());
    for (size_t t = 0; t < at.size(); ++t)
      for (int k : at[t]) plan->kinds[t].push_back(inSlice.kinds[t][static_cast<size_t>(k)]);
  }
  return *(plans_[{rank, inplace}] = std::move(plan));
}

namespace {

// Happens-before searches over one graph, back from the later step through
// at most `budget` steps; false when not shown within it. The visited marks
// are stamped, so a plan's many searches share one array.
class BeforeSearch {
 public:
  explicit BeforeSearch(const verify::StepGraph& g) : g_(g), stamp_(g.size(), 0) {}
  bool proven(verify::NodeId a, verify::NodeId b, size_t budget = 1 << 14) {
    if (a == b) return true;
    if (++now_ == 0) {  // wrapped: clear the marks
      std::fill(stamp_.begin(), stamp_.end(), 0);
      now_ = 1;
    }
    stack_.assign(1, b);
    stamp_[static_cast<size_t>(b)] = now_;
    while (!stack_.empty()) {
      verify::NodeId n = stack_.back();
      stack_.pop_back();
      if (budget-- == 0) return false;
      for (verify::NodeId p : g_.preds(n)) {
        if (p == a) return true;
        if (p == verify::kNoNode || stamp_[static_cast<size_t>(p)] == now_) continue;
        stamp_[static_cast<size_t>(p)] = now_;
        stack_.push_back(p);
      }
    }
    return false;
  }

 private:
  const verify::StepGraph& g_;
  std::vector<uint32_t> stamp_;
  uint32_t now_ = 0;
  std::vector<verify::NodeId> stack_;
};

// Where a buffer's chunks lie in one address space, in units of 1/n chunk
// (n = ranks): out of place the three buffers are far apart; in place input
// and output overlap as NCCL's rule puts them (isInPlaceCall), shifted by
// rank x count elements = rank x nchunks/n chunks for allgather and
// reduce-scatter (gather and scatter: rank x a share, the same). Overlap in
// these units is overlap in bytes for every chunk size.
struct Layout {
  int64_t base[ir::kNumBuffers] = {0, 0, 0};
  int64_t unit = 1;  // units per chunk
  Layout(const ir::Algorithm& a, int rank, bool inplace) : unit(std::max(a.ngpus, 1)) {
    constexpr int64_t kApart = int64_t{1} << 58;
    const int in = static_cast<int>(Buffer::kInput), out = static_cast<int>(Buffer::kOutput);
    base[static_cast<int>(Buffer::kScratch)] = 2 * kApart;
    base[out] = kApart;
    if (!inplace) return;
    const int64_t shift = int64_t{rank} * a.nchunksPerLoop;
    switch (traits(a.collective).inPlace) {
      case InPlace::kInputInOutput:
        base[in] = base[out] + shift;
        break;
      case InPlace::kOutputInInput:
        base[in] = base[out] - shift;
        break;
      case InPlace::kSame:
        base[in] = base[out];
    }
  }
  struct Range {
    int64_t lo, hi;
    bool overlaps(const Range& o) const { return lo < o.hi && o.lo < hi; }
  };
  Range of(Buffer b, int off, int cnt) const {
    int64_t lo = base[static_cast<int>(b)] + int64_t{off} * unit;
    return {lo, lo + int64_t{cnt} * unit};
  }
};

}  // namespace

RefPlan planReferences(const ir::Algorithm& algo, const verify::StepGraph& g, int rank,
                       bool inplace) {
  const ir::Rank& me = algo.ranks[static_cast<size_t>(rank)];
  const Layout layout(algo, rank, inplace);
  BeforeSearch search(g);
  // Every step that writes, by where its range starts: the writes that may
  // overlap a message start less than the longest write before it.
  struct Write {
    Layout::Range range;
    int tb, step;
  };
  std::vector<Write> writes;
  int64_t longest = 0;
  for (size_t u = 0; u < me.tbs.size(); ++u)
    for (size_t j = 0; j < me.tbs[u].steps.size(); ++j) {
      const ir::Step& w = me.tbs[u].steps[j];
      if (!ir::writesDst(w.type)) continue;
      Write wr{layout.of(w.dstBuf, w.dstOff, w.count), static_cast<int>(u), static_cast<int>(j)};
      longest = std::max(longest, wr.range.hi - wr.range.lo);
      writes.push_back(wr);
    }
  std::sort(writes.begin(), writes.end(),
            [](const Write& a, const Write& b) { return a.range.lo < b.range.lo; });
  RefPlan plan;
  plan.kinds.resize(me.tbs.size());
  for (size_t t = 0; t < me.tbs.size(); ++t) {
    const auto& steps = me.tbs[t].steps;
    plan.kinds[t].assign(steps.size(), kRefNever);
    for (size_t i = 0; i < steps.size(); ++i) {
      const ir::Step& s = steps[i];
      // The message is the step's src (s) or its freshly written dst (rcs,
      // rrcs); rrs computes into the slot.
      bool fromSrc = s.type == StepType::kSend;
      if (!fromSrc && s.type != StepType::kRecvCopySend && s.type != StepType::kRecvReduceCopySend)
        continue;
      const Layout::Range msg =
          fromSrc ? layout.of(s.srcBuf, s.srcOff, s.count) : layout.of(s.dstBuf, s.dstOff, s.count);
      const verify::NodeId send = g.node(rank, static_cast<int>(t), static_cast<int>(i));
      const verify::NodeId consumer = g.matchedRecv(send);
      bool stable = true;
      auto w = std::lower_bound(writes.begin(), writes.end(), msg.lo - longest,
                                [](const Write& a, int64_t lo) { return a.range.lo < lo; });
      for (; w != writes.end() && w->range.lo < msg.hi && stable; ++w) {
        if (!w->range.overlaps(msg) ||
            (w->tb == static_cast<int>(t) && w->step == static_cast<int>(i)))
          continue;
        // Safe if the write comes before the send, or after the peer has
        // consumed the message (its receive happens before the write).
        verify::NodeId write = g.node(rank, w->tb, w->step);
        stable = w->tb == static_cast<int>(t) ? w->step < static_cast<int>(i)
                                              : search.proven(write, send);
        stable = stable || (consumer != verify::kNoNode && search.proven(consumer, write));
      }
      if (!stable) continue;
      // Whether it is also a plain send's message to a receiver that copies
      // it: the only references worth a system call across processes
      // where the memory is not mappable (SendPort::refsForCopiesOnly).
      StepType rt = consumer == verify::kNoNode ? StepType::kNop : g.step(consumer).type;
      bool toCopier = fromSrc && (rt == StepType::kRecv || rt == StepType::kRecvCopySend);
      plan.kinds[t][i] = toCopier ? kRefToCopier : kRefStable;
    }
  }
  return plan;
}

std::pair<size_t, size_t> bufferElems(const ir::Algorithm& a, size_t count) {
  return bufferElems(a.collective, a.ngpus, count);
}

std::pair<size_t, size_t> bufferElems(CollectiveKind coll, int nranks, size_t count) {
  const CollectiveTraits& t = traits(coll);
  return {extentElems(t.input, count, nranks), extentElems(t.output, count, nranks)};
}

bool isInPlaceCall(CollectiveKind coll, const CallArgs& c, int rank, int nranks) {
  auto send = reinterpret_cast<uintptr_t>(c.sendbuff);
  auto recv = reinterpret_cast<uintptr_t>(c.recvbuff);
  // The rank's block: count, or for gather and scatter its share count / n.
  size_t shift =
      static_cast<size_t>(rank) * blockElems(coll, c.count, nranks) * dataTypeSize(c.type);
  switch (traits(coll).inPlace) {
    case InPlace::kInputInOutput:
      return send == recv + shift;
    case InPlace::kOutputInInput:
      return recv == send + shift;
    case InPlace::kSame:
      return send == recv;
  }
  return send == recv;
}

namespace {}  // namespace

Result<Geometry> planRankCall(const VerifiedAlgorithm& va, int rank, const CallArgs& c,
                              size_t sliceBytes) {
  const ir::Algorithm& a = va.algo();
  if (rank < 0 || rank >= a.ngpus)
    return invalidArgument("rank " + std::to_string(rank) + " is not a rank of algorithm '" +
                           a.name + "' (" + std::to_string(a.ngpus) + " ranks)");
  size_t totalElems = c.count * countMultiplier(a);
  auto nchunks = static_cast<size_t>(a.nchunksPerLoop);
  if (totalElems % nchunks != 0) {
    return invalidArgument("count " + std::to_string(c.count) + " (" + std::to_string(totalElems) +
                           " elements in all) does not split into the " + std::to_string(nchunks) +
                           " equal chunks algorithm '" + a.name + "' uses");
  }
  if (sliceBytes == 0) sliceBytes = ir::sliceBytesOf(a);
  Geometry g;
  static_cast<ir::Slicing&>(g) =
      ir::Slicing::make(dataTypeSize(c.type), totalElems, nchunks, sliceBytes);
  if (c.count > 0 && (c.sendbuff == nullptr || c.recvbuff == nullptr))
    return invalidArgument("rank " + std::to_string(rank) + " passes a null buffer");
  g.inplace = isInPlaceCall(a.collective, c, rank, a.ngpus);
  if (!g.inplace && c.count > 0) {
    auto [inElems, outElems] = bufferElems(a, c.count);
    auto s = reinterpret_cast<uintptr_t>(c.sendbuff);
    auto o = reinterpret_cast<uintptr_t>(c.recvbuff);
    if (s < o + outElems * g.elemSize && o < s + inElems * g.elemSize)
      return invalidArgument("rank " + std::to_string(rank) +
                             ": send and receive buffers overlap without being an in-place call");
  }
  if (g.inplace ? !a.inplace : !a.outofplace) {
    return invalidArgument(std::string("algorithm '") + a.name + "' does not serve " +
                           (g.inplace ? "in-place" : "out-of-place") + " calls");
  }
  if (c.op == ReduceOp::kAvg && !reducesToOutput(a.collective))
    return invalidArgument("avg needs a reducing collective, not " + a.collectiveName);
  return g;
}

Result<Geometry> planCall(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls,
                          size_t sliceBytes) {
  const ir::Algorithm& a = va.algo();
  if (static_cast<int>(calls.size()) != a.ngpus) {
    return invalidArgument("algorithm '" + a.name + "' is for " + std::to_string(a.ngpus) +
                           " ranks, the call has " + std::to_string(calls.size()));
  }
  const CallArgs& c0 = calls[0];
  for (size_t r = 1; r < calls.size(); ++r) {
    const CallArgs& c = calls[r];
    if (c.count != c0.count || c.type != c0.type || c.op != c0.op) {
      return invalidArgument("rank " + std::to_string(r) + " calls with count " +
                             std::to_string(c.count) + ", " + std::string(dataTypeName(c.type)) +
                             ", " + std::string(reduceOpName(c.op)) + " but rank 0 with count " +
                             std::to_string(c0.count) + ", " + std::string(dataTypeName(c0.type)) +
                             ", " + std::string(reduceOpName(c0.op)));
    }
  }
  Result<Geometry> g0 = planRankCall(va, 0, c0, sliceBytes);
  for (int r = 1; g0.isOk() && r < a.ngpus; ++r) {
    Result<Geometry> g = planRankCall(va, r, calls[static_cast<size_t>(r)], sliceBytes);
    if (!g.isOk()) return g.status();
    if (g.value().inplace != g0.value().inplace)
      return invalidArgument("ranks disagree on whether the call is in place");
  }
  return g0;
}

RankExecutor::RankExecutor(const VerifiedAlgorithm& va, int rank, const CallArgs& call,
                           const Geometry& g, std::vector<SendPort*> sendPorts,
                           std::vector<RecvPort*> recvPorts, void* scratch)
    : va_(va),
      algo_(va.algo()),
      rank_(va.algo().ranks[static_cast<size_t>(rank)]),
      call_(call),
      g_(g),
      sendPorts_(std::move(sendPorts)),
      recvPorts_(std::move(recvPorts)),
      tbs_(rank_.tbs.size()) {
  // The verifier proved that out-of-place algorithms never write their input
  // (E304), so writing through this pointer only happens in place.
  base_[static_cast<int>(Buffer::kInput)] =
      const_cast<unsigned char*>(static_cast<const unsigned char*>(call.sendbuff));
  base_[static_cast<int>(Buffer::kOutput)] = static_cast<unsigned char*>(call.recvbuff);
  base_[static_cast<int>(Buffer::kScratch)] = static_cast<unsigned char*>(scratch);
  auto [inElems, outElems] = bufferElems(algo_, call.count);
  extent_[static_cast<int>(Buffer::kInput)] = inElems * g.elemSize;
  extent_[static_cast<int>(Buffer::kOutput)] = outElems * g.elemSize;
  extent_[static_cast<int>(Buffer::kScratch)] =
      static_cast<size_t>(rank_.scratchChunks) * g.chunkElems * g.elemSize;
  // The collective's, not this rank's steps': a rank that only sends in a
  // reduction still reduces with its peers' operation.
  reduces_ = algo_.collective == CollectiveKind::kCustom || reducesToOutput(algo_.collective);
  signature_ = markSignature(call_, reduces_);
  mappable_ = anyTakesSharedRefs(sendPorts_);
  planRefs();
  reset();
}

void RankExecutor::findRegions() {
  // Looked up for every run, not once: the same addresses may belong to
  // another allocation by now (a buffer freed and allocated again), which
  // a receiver must not take for the one it mapped before.
  // Unchanged since the last run while no region came or went.
  uint64_t gen = mappable_ ? shared_buffers::generation() : 0;
  if (gen == regionsGeneration_) return;
  regionsGeneration_ = gen;
  for (int b = 0; b < ir::kNumBuffers; ++b)
    regions_[b] = mappable_ && base_[b] != nullptr && extent_[b] > 0
                      ? shared_buffers::find(base_[b], extent_[b])
                      : std::nullopt;
}

const SharedRegion* RankExecutor::refRegion(int t, int i) const {
  const ir::Step& s = rank_.tbs[static_cast<size_t>(t)].steps[static_cast<size_t>(i)];
  const std::optional<SharedRegion>& r =
      regions_[static_cast<int>(s.type == StepType::kSend ? s.srcBuf : s.dstBuf)];
  return r.has_value() && sendPorts_[static_cast<size_t>(t)]->supportsSharedRefs() ? &*r : nullptr;
}

bool RankExecutor::sendsByRef(int t, int i, size_t msgBytes) const {
  uint8_t kind = byRef_[static_cast<size_t>(t)][static_cast<size_t>(i)];
  if (kind == kRefNever) return false;
  if (refRegion(t, i) != nullptr) return true;  // read in place: any size, any receiver
  const SendPort& port = *sendPorts_[static_cast<size_t>(t)];
  if (port.refsForCopiesOnly() && kind != kRefToCopier) return false;
  return msgBytes >= port.minRefBytes() && msgBytes <= port.maxRefBytes();
}

void RankExecutor::planRefs() {
  byRef_ = va_.refPlan(rank_.id, g_.inplace).kinds;
  const bool empty = g_.chunkElems * g_.elemSize == 0;
  for (size_t t = 0; t < byRef_.size(); ++t)
    if (empty || sendPorts_[t] == nullptr || !sendPorts_[t]->supportsRefs())
      std::fill(byRef_[t].begin(), byRef_[t].end(), kRefNever);
}

bool RankExecutor::sendsDrained() const {
  for (SendPort* p : sendPorts_)
    if (p != nullptr && !p->drained()) return false;
  return true;
}

int RankExecutor::refSteps() const {
  int n = 0;
  for (size_t t = 0; t < byRef_.size(); ++t)
    for (size_t i = 0; i < byRef_[t].size(); ++i)
      n += sendsByRef(static_cast<int>(t), static_cast<int>(i), 0) ||
           sendsByRef(static_cast<int>(t), static_cast<int>(i), SIZE_MAX / 2);
  return n;
}

void RankExecutor::reset() {
  findRegions();
  doneTbs_ = 0;
  failure_ = Status::ok();
  for (size_t t = 0; t < tbs_.size(); ++t) {
    tbs_[t] = TbState{};
    tbs_[t].end = g_.iterations + rank_.tbs[t].maxLag();
    if (rank_.tbs[t].steps.empty() || g_.iterations == 0) {
      tbs_[t].iter = tbs_[t].end;
      ++doneTbs_;
    }
  }
}

unsigned char* RankExecutor::chunkPtr(Buffer b, int chunk, size_t iter) const {
  return base_[static_cast<int>(b)] +
         g_.sliceOffset(static_cast<size_t>(chunk), iter) * g_.elemSize;
}

std::string RankExecutor::mismatch(int t, size_t got, uint32_t mark, size_t msgBytes) const {
  const TbState& st = tbs_[static_cast<size_t>(t)];
  const ir::Threadblock& tb = rank_.tbs[static_cast<size_t>(t)];
  const std::string peer = "rank " + std::to_string(tb.recvPeer);
  const ir::Step& s = tb.steps[static_cast<size_t>(st.pc)];
  const uint32_t want = messageMark(signature_, g_.iterations - (st.iter - s.lag));
  std::string what;
  if ((mark >> kMarkSignatureShift) != signature_) {
    what = peer + "'s call is on " + describeSignature(mark >> kMarkSignatureShift, reduces_) +
           " where this rank's is on " + describeSignature(signature_, reduces_);
  } else if ((mark & kMarkLeftMask) != (want & kMarkLeftMask)) {
    what = peer + " sent a message with " + std::to_string(mark & kMarkLeftMask) +
           " slices of its call left (itself included) where this rank's call has " +
           std::to_string(want & kMarkLeftMask) + " (slice " + std::to_string(st.iter - s.lag) +
           " of " + std::to_string(g_.iterations) + ")";
  } else {
    what = peer + " sent " + std::to_string(got) + " bytes where this step expects " +
           std::to_string(msgBytes);
  }
  return "rank " + std::to_string(rank_.id) + " threadblock " + std::to_string(t) + " step " +
         std::to_string(st.pc) + ": " + what +
         "; do all ranks pass the same count, type, operation and algorithm?";
}

bool RankExecutor::tryStep(int t) {
  TbState& st = tbs_[static_cast<size_t>(t)];
  const ir::Threadblock& tb = rank_.tbs[static_cast<size_t>(t)];
  if (st.iter >= st.end || !failure_.isOk()) return false;
  const ir::Step& s = tb.steps[static_cast<size_t>(st.pc)];
  // A lagged step before its first slice or past its last has nothing to
  // move (what waits on it waits on a slice it does move).
  if (st.iter < s.lag || st.iter - s.lag >= g_.iterations) return finishStep(t);
  (void)failpoint("step");  // fault injection (core/failpoint.h)
  const size_t slice = st.iter - s.lag;
  if (!dependencyMet(s, slice)) return false;
  size_t n = g_.sliceLen(slice);
  size_t chunkBytes = n * g_.elemSize;
  size_t msgBytes = static_cast<size_t>(s.count) * chunkBytes;
  const uint32_t mark = messageMark(signature_, g_.iterations - slice);
  // A step's `count` chunks are contiguous in its buffers at one iteration
  // when a chunk is one slice (or there is one chunk).
  bool contiguous = g_.contiguous(s.count);
  // A step that only copies the message to its destination receives it
  // there when the transport can (RecvPort::expect; TCP).
  bool copiesIn = contiguous && (s.type == StepType::kRecv || s.type == StepType::kRecvCopySend);
  const unsigned char* in = nullptr;
  if (ir::receives(s.type)) {
    size_t got = 0;
    RecvPort& port = *recvPorts_[static_cast<size_t>(t)];
    in = static_cast<const unsigned char*>(port.tryPeek(&got));
    if (in == nullptr) {
      // Its dependencies are met: nothing else touches the destination
      // before this step is done (what the verifier proves of a step).
      if (copiesIn) port.expect(chunkPtr(s.dstBuf, s.dstOff, slice), msgBytes);
      return false;
    }
    if (got != msgBytes || port.peekedMark() != mark) {
      failure_ =
          Status(StatusCode::kInvalidArgument, mismatch(t, got, port.peekedMark(), msgBytes));
      return false;
    }
  }
  unsigned char* out = nullptr;
  // By reference: the message is `count` contiguous slices of this rank's
  // memory.
  bool byRef = contiguous && sendsByRef(t, st.pc, msgBytes);
  if (ir::sends(s.type)) {
    out = static_cast<unsigned char*>(sendPorts_[static_cast<size_t>(t)]->tryAcquire(msgBytes));
    if (out == nullptr) return false;
  }
  // A message still in the sender's process: copied once, straight to its
  // destination when the step only copies it there, else into the slot.
  // One that was received at its destination is there already.
  bool fetchedToDst = copiesIn && in == chunkPtr(s.dstBuf, s.dstOff, slice);
  if (in != nullptr && recvPorts_[static_cast<size_t>(t)]->peekedRemote()) {
    RecvPort& port = *recvPorts_[static_cast<size_t>(t)];
    fetchedToDst = copiesIn;
    void* to = fetchedToDst ? chunkPtr(s.dstBuf, s.dstOff, slice) : const_cast<unsigned char*>(in);
    Status got = port.fetch(to, 0, msgBytes);
    if (!got.isOk()) {
      failure_ = Status(got.code(), "rank " + std::to_string(rank_.id) + " threadblock " +
                                        std::to_string(t) + " step " + std::to_string(st.pc) +
                                        ": from rank " + std::to_string(tb.recvPeer) + ": " +
                                        got.message());
      return false;
    }
    if (fetchedToDst) in = chunkPtr(s.dstBuf, s.dstOff, slice);
  }
  if (byRef) {
    unsigned char* msg = s.type == StepType::kSend ? chunkPtr(s.srcBuf, s.srcOff, slice)
                                                   : chunkPtr(s.dstBuf, s.dstOff, slice);
    for (int k = 0; k < s.count; ++k) {
      size_t at = static_cast<size_t>(k) * chunkBytes;
      unsigned char* src = s.srcOff >= 0 ? chunkPtr(s.srcBuf, s.srcOff + k, slice) : nullptr;
      unsigned char* dst = chunkPtr(s.dstBuf, s.dstOff + k, slice);
      if (s.type == StepType::kRecvCopySend && !fetchedToDst)
        copy(dst, in + at, chunkBytes);
      else if (s.type == StepType::kRecvReduceCopySend)
        reduceInto(dst, in + at, src, n);
    }
    if (in != nullptr) recvPorts_[static_cast<size_t>(t)]->release();
    bool posted =
        sendPorts_[static_cast<size_t>(t)]->tryPostRef(msg, msgBytes, mark, refRegion(t, st.pc));
    CHORUS_CHECK(posted, "a slot acquired for a message went missing");
    return finishStep(t);
  }
  for (int k = 0; k < s.count; ++k) {
    size_t at = static_cast<size_t>(k) * chunkBytes;
    unsigned char* src = s.srcOff >= 0 ? chunkPtr(s.srcBuf, s.srcOff + k, slice) : nullptr;
    unsigned char* dst = s.dstOff >= 0 ? chunkPtr(s.dstBuf, s.dstOff + k, slice) : nullptr;
    switch (s.type) {
      case StepType::kSend:
        copy(out + at, src, chunkBytes);
        break;
      case StepType::kRecv:
        if (!fetchedToDst) copy(dst, in + at, chunkBytes);
        break;
      case StepType::kRecvCopySend:
        if (!fetchedToDst) copy(dst, in + at, chunkBytes);
        copy(out + at, in + at, chunkBytes);
        break;
      case StepType::kRecvReduceSend:
        reduceInto(out + at, in + at, src, n);
        break;
      case StepType::kRecvReduceCopy:
        reduceInto(dst, in + at, src, n);
        break;
      case StepType::kRecvReduceCopySend:
        reduceInto(dst, in + at, src, n);
        copy(out + at, dst, chunkBytes);
        break;
      case StepType::kCopy:
        if (dst + chunkBytes <= src || src + chunkBytes <= dst)
          copy(dst, src, chunkBytes);
        else if (dst != src)
          std::memmove(dst, src, chunkBytes);
        break;
      case StepType::kReduce:
        reduceInto(dst, dst, src, n);
        break;
      case StepType::kNop:
        break;
    }
  }
  if (in != nullptr) recvPorts_[static_cast<size_t>(t)]->release();
  if (out != nullptr) sendPorts_[static_cast<size_t>(t)]->commit(msgBytes, mark);
  return finishStep(t);
}

namespace {
constexpr size_t kPollPieceBytes = 256 << 10;  // a poll (a system call) per 256 KiB: < 3 %
}  // namespace

template <class Work>
void RankExecutor::inPieces(size_t elems, size_t elemBytes, Work work) {
  const size_t piece = std::max<size_t>(1, kPollPieceBytes / elemBytes);
  if (poller_ == nullptr || elems <= piece) {
    work(0, elems);
    return;
  }
  for (size_t at = 0; at < elems; at += piece) {
    if (at > 0) poller_->poll();
    work(at, std::min(piece, elems - at));
  }
}

void RankExecutor::copy(void* dst, const void* src, size_t bytes) {
  inPieces(bytes, 1, [&](size_t at, size_t len) {
    std::memcpy(static_cast<unsigned char*>(dst) + at, static_cast<const unsigned char*>(src) + at,
                len);
  });
}

void RankExecutor::reduceInto(void* dst, const void* a, const void* b, size_t n) {
  const size_t e = g_.elemSize;
  inPieces(n, e, [&](size_t at, size_t len) {
    reduce(call_.type, call_.op, static_cast<unsigned char*>(dst) + at * e,
           static_cast<const unsigned char*>(a) + at * e,
           static_cast<const unsigned char*>(b) + at * e, len);
  });
}

bool RankExecutor::finishStep(int t) {
  TbState& st = tbs_[static_cast<size_t>(t)];
  const ir::Threadblock& tb = rank_.tbs[static_cast<size_t>(t)];
  ++st.completed;
  if (++st.pc == static_cast<int>(tb.steps.size())) {
    st.pc = 0;
    if (++st.iter == st.end) ++doneTbs_;
  }
  return true;
}

Status RankExecutor::runStep(int tb, int step, size_t iteration) {
  auto stepError = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(rank_.id) + " tb " +
                                                    std::to_string(tb) + " step " +
                                                    std::to_string(step) + " iteration " +
                                                    std::to_string(iteration) + ": " + why);
  };
  if (tb < 0 || tb >= static_cast<int>(tbs_.size())) return stepError("no such threadblock");
  const TbState& st = tbs_[static_cast<size_t>(tb)];
  if (st.iter >= st.end) return stepError("the threadblock is done");
  if (st.pc != step || st.iter != iteration)
    return stepError("the threadblock is at step " + std::to_string(st.pc) + " iteration " +
                     std::to_string(st.iter));
  if (!tryStep(tb)) return failure_.isOk() ? stepError("cannot run: " + blockedOn(tb)) : failure_;
  return Status::ok();
}

Progress RankExecutor::advance() {
  if (done()) return Progress::kDone;
  bool moved = false;
  for (int t = 0; t < static_cast<int>(tbs_.size()); ++t) {
    while (tryStep(t)) moved = true;
  }
  return moved ? Progress::kProgress : Progress::kBlocked;
}

// In slice j a step needs its dependency's step to have moved slice j of
// its own loop, lagged by its own lag (Step::lag).
bool RankExecutor::dependencyMet(const ir::Step& s, size_t slice) const {
  if (s.depTb < 0) return true;
  const ir::Threadblock& dep = rank_.tbs[static_cast<size_t>(s.depTb)];
  const size_t depLag = dep.steps[static_cast<size_t>(s.depStep)].lag;
  return tbs_[static_cast<size_t>(s.depTb)].completed >=
         ir::stepsNeeded(slice + depLag, dep.steps.size(), s.depStep);
}

std::string RankExecutor::blockedOn(int t) const {
  const TbState& st = tbs_[static_cast<size_t>(t)];
  const ir::Threadblock& tb = rank_.tbs[static_cast<size_t>(t)];
  const ir::Step& s = tb.steps[static_cast<size_t>(st.pc)];
  if (st.iter >= s.lag && !dependencyMet(s, st.iter - s.lag))
    return "tb " + std::to_string(s.depTb) + " step " + std::to_string(s.depStep);
  if (ir::receives(s.type)) {
    size_t bytes = 0;
    if (recvPorts_[static_cast<size_t>(t)]->tryPeek(&bytes) == nullptr)
      return "a message from rank " + std::to_string(tb.recvPeer) + " on channel " +
             std::to_string(tb.channel);
  }
  return "a free slot to rank " + std::to_string(tb.sendPeer) + " on channel " +
         std::to_string(tb.channel);
}

void RankExecutor::abandon() {
  for (RecvPort* p : recvPorts_)
    if (p != nullptr) p->abandon();
}

std::vector<std::string> RankExecutor::waiting() const {
  std::vector<std::string> out;
  for (int t = 0; t < static_cast<int>(tbs_.size()); ++t) {
    const TbState& st = tbs_[static_cast<size_t>(t)];
    if (st.iter >= st.end) continue;
    const ir::Step& s = rank_.tbs[static_cast<size_t>(t)].steps[static_cast<size_t>(st.pc)];
    out.push_back("tb " + std::to_string(t) + " step " + std::to_string(st.pc) + " (" +
                  std::string(ir::stepTypeName(s.type)) + ", iteration " + std::to_string(st.iter) +
                  "): waiting for " + blockedOn(t));
  }
  // Steps done, but data lent by reference not yet taken by its reader.
  for (size_t t = 0; t < sendPorts_.size(); ++t) {
    if (sendPorts_[t] == nullptr || sendPorts_[t]->drained()) continue;
    const ir::Threadblock& tb = rank_.tbs[t];
    out.push_back("tb " + std::to_string(t) + ": waiting for rank " + std::to_string(tb.sendPeer) +
                  " to take what it was sent on channel " + std::to_string(tb.channel));
  }
  return out;
}

}  // namespace chorus::runtime
