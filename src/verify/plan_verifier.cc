#include "verify/plan_verifier.h"

#include <algorithm>
#include <array>
#include <deque>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "verify/plan_trace.h"

namespace chorus::verify {

// (A named namespace: the unity build joins this file with semantics.cc.)
namespace plan_check {

using namespace ir::mscclpp;  // NOLINT(google-build-using-namespace): the plan's vocabulary

// MSCCL++'s executor limits: ir::mscclpp::limits.
using namespace ir::mscclpp::limits;  // NOLINT(google-build-using-namespace)
constexpr int kMaxReports = 12;       // of one kind (races, wrong chunks)
// The verifier's own bounds (memory units, unrolled steps).
constexpr uint64_t kMostCells = uint64_t{1} << 23;
constexpr uint64_t kMostSteps = uint64_t{1} << 21;

bool packetForm(const Op& o, bool src, size_t i);
// A packet source read only once its flags say it arrived: all but a port
// channel's ppkt, whose proxy copies the packets as they are.
bool waitsForFlags(const Op& o, size_t i) {
  return packetForm(o, true, i) &&
         !(o.type == OpType::kPutPackets && o.channelType == ChannelType::kPort);
}

bool isPacketOp(OpType t) {
  switch (t) {
    case OpType::kPutPackets:
    case OpType::kReadPutPackets:
    case OpType::kReduceSendPackets:
    case OpType::kCopyPackets:
    case OpType::kUnpackPackets:
    case OpType::kReducePackets:
    case OpType::kReduceCopyPackets:
    case OpType::kReduceCopySendPackets:
      return true;
    default:
      return false;
  }
}

// Whether entry `i` of an op's src (or dst) list is in packet form: in
// scratch, at twice its data offset, read once its flags say it arrived
// (but see waitsForFlags).
bool packetForm(const Op& o, bool src, size_t i) {
  switch (o.type) {
    case OpType::kPutPackets:
      // On port channels the proxy copies packets as they are: the source
      // is packets too (handlePutPackets).
      return !src || o.channelType == ChannelType::kPort;
    case OpType::kReadPutPackets:
      return true;
    case OpType::kCopyPackets:
      return !src;
    case OpType::kUnpackPackets:
      return src;
    case OpType::kReducePackets:
      return src && i >= 1;
    case OpType::kReduceSendPackets:
      return i >= 1;
    case OpType::kReduceCopyPackets:
    case OpType::kReduceCopySendPackets:
      return i >= 1;
    default:
      return false;
  }
}

// One unit of memory: the input elements summed into it (ids, sorted), and
// who touched it last (for races).
struct Epoch {
  int tb = -1;      // global threadblock index
  uint32_t op = 0;  // its op counter (1-based)
  bool valid() const { return tb >= 0; }
  bool operator==(const Epoch& o) const { return tb == o.tb && op == o.op; }
};
struct Cell {
  bool defined = false;
  bool packet = false;  // packet memory: written (flags set) in this launch
  std::vector<uint32_t> sum;
  Epoch write;
  bool packetWrite = false;
  std::vector<Epoch> reads;  // since the write, at most one per threadblock
  // Packets: the ops whose thread, for this element, acted before the
  // packet's flag was set (the writer and what its value came through).
  std::vector<Epoch> chain;
};
// A value on its way through an op: the input elements summed in it, and
// the ops that reached it through packets (each an order for this element
// only: a flag orders the thread that set it, element by element).
struct Value {
  bool defined = false;
  std::vector<uint32_t> sum;
  std::vector<Epoch> chain;
};
constexpr size_t kLongestChain = 32;
void addToChain(std::vector<Epoch>& chain, const Epoch& e) {
  if (std::find(chain.begin(), chain.end(), e) == chain.end() && chain.size() < kLongestChain)
    chain.push_back(e);
}

struct Tb {
  int rank = 0, id = 0, global = 0;
  struct Step {
    const Op* op;
    int index;            // flattened position (diagnostics)
    int64_t window = -1;  // pipeline iteration's first unit, or -1
    size_t windowLen = 0;
  };
  std::vector<Step> steps;
  size_t pc = 0;
  uint32_t counter = 0;  // ops run
  std::vector<uint32_t> vc;
  std::vector<uint32_t> pending;  // joins a wait brought, for the next nop
  bool atBarrier = false;
};

// A signal in flight to the channel that waits for it.
struct Token {
  bool strong = true;  // signal (not relaxed): carries the sender's clock
  std::vector<uint32_t> vc;
};

class Verifier {
 public:
  Verifier(const Plan& p, std::string file, const PlanOptions& o, PlanReport& out, PlanTrace* trace)
      : p_(p), file_(std::move(file)), opt_(o), out_(out), d_(out.diagnostics), trace_(trace) {}

  void run() {
    n_ = static_cast<int>(p_.gpus.size());
    if (n_ == 0) return err(DiagCode::kPlanStructure, -1, -1, -1, "the plan has no gpus");
    structure();
    limits();
    if (d_.hasErrors()) return;
    chooseUnits();
    build();
    if (d_.hasErrors()) return;
    if (trace_) trace_->begin(U_);
    seedSemaphores();
    execute();
    // (After a race too: what this order of execution left is worth seeing.)
    if (d_.contains(DiagCode::kPlanDeadlock)) return;
    postcondition();
  }

 private:
  // --- diagnostics ---
  void err(DiagCode c, int rank, int tb, int step, const std::string& msg) {
    Location l;
    l.file = file_;
    l.rank = rank;
    l.tb = tb;
    l.step = step;
    d_.add(c, l, msg);
  }

  // --- 1. structure ---
  const Gpu& gpu(int r) const { return p_.gpus[static_cast<size_t>(r)]; }
  // GPU-level channels of a type: their peers (memory, port).
  std::vector<int> peers(int r, ChannelType t) const {
    std::vector<int> out;
    for (const Channel& c : gpu(r).channels)
      if (c.type == t) out.insert(out.end(), c.connectedTo.begin(), c.connectedTo.end());
    return out;
  }
  struct Switch {
    std::vector<int> ranks;
    BufferType type;
  };
  std::vector<Switch> switches(int r) const {
    std::vector<Switch> out;
    for (const Channel& c : gpu(r).channels)
      if (c.type == ChannelType::kSwitch)
        for (const RankGroup& g : c.rankGroups) out.push_back({g.ranks, c.bufferType});
    return out;
  }
  const TbChannels* tbChannels(const Threadblock& t, ChannelType type) const {
    for (const TbChannels& c : t.channels)
      if (c.type == type) return &c;
    return nullptr;
  }
  const TbRemoteRefs* tbRefs(const Threadblock& t, ChannelType type) const {
    if (!t.remoteRefs) return nullptr;
    for (const TbRemoteRefs& r : *t.remoteRefs)
      if (r.type == type) return &r;
    return nullptr;
  }
  uint32_t chunksOf(int r, BufferType t) const {
    const Gpu& g = gpu(r);
    return t == BufferType::kInput    ? g.inputChunks
           : t == BufferType::kOutput ? g.outputChunks
                                      : g.scratchChunks;
  }

  void structure() {
    const std::string coll = p_.collective;
    for (int r = 0; r < n_; ++r) {
      const Gpu& g = gpu(r);
      if (g.id != r)
        err(DiagCode::kPlanStructure, r, -1, -1,
            "gpus[" + std::to_string(r) + "] has id " + std::to_string(g.id) +
                " (MSCCL++ needs gpus sorted by id from 0)");
      for (const Channel& c : g.channels) {
        for (int q : c.connectedTo)
          if (q < 0 || q >= n_ || q == r)
            err(DiagCode::kPlanStructure, r, -1, -1,
                std::string("a ") + channelTypeName(c.type) + " channel connects to rank " +
                    std::to_string(q) + ", not another rank of the plan");
        for (const RankGroup& rg : c.rankGroups) {
          if (std::find(rg.ranks.begin(), rg.ranks.end(), r) == rg.ranks.end())
            err(DiagCode::kPlanStructure, r, -1, -1,
                "a switch channel's group leaves out its rank");
          for (int q : rg.ranks)
            if (q < 0 || q >= n_)
              err(DiagCode::kPlanStructure, r, -1, -1,
                  "a switch channel's group names rank " + std::to_string(q));
        }
      }
      for (size_t b = 0; b < g.remoteBuffers.size(); ++b) {
        const RemoteBuffer& rb = g.remoteBuffers[b];
        if (rb.rank < 0 || rb.rank >= n_ || rb.rank == r)
          err(DiagCode::kPlanStructure, r, -1, -1,
              "remote_buffers[" + std::to_string(b) + "] is on rank " + std::to_string(rb.rank) +
                  ", not another rank of the plan");
      }
      for (size_t t = 0; t < g.threadblocks.size(); ++t) {
        const Threadblock& tb = g.threadblocks[t];
        if (tb.id != static_cast<int>(t))
          err(DiagCode::kPlanStructure, r, static_cast<int>(t), -1,
              "threadblocks[" + std::to_string(t) + "] has id " + std::to_string(tb.id) +
                  " (MSCCL++ runs threadblock i as block i)");
        for (const TbChannels& c : tb.channels) {
          size_t have =
              c.type == ChannelType::kSwitch ? switches(r).size() : peers(r, c.type).size();
          for (int id : c.ids)
            if (id < 0 || static_cast<size_t>(id) >= have)
              err(DiagCode::kPlanStructure, r, tb.id, -1,
                  std::string(channelTypeName(c.type)) + " channel " + std::to_string(id) +
                      " is not one of the rank's " + std::to_string(have));
        }
        if (tb.remoteRefs)
          for (const TbRemoteRefs& rr : *tb.remoteRefs)
            for (int id : rr.ids) {
              if (id < 0 || static_cast<size_t>(id) >= g.remoteBuffers.size()) {
                err(DiagCode::kPlanStructure, r, tb.id, -1,
                    "remote buffer " + std::to_string(id) + " is not one of the rank's " +
                        std::to_string(g.remoteBuffers.size()));
                continue;
              }
              const RemoteBuffer& rb = g.remoteBuffers[static_cast<size_t>(id)];
              if (std::find(rb.access.begin(), rb.access.end(), rr.type) == rb.access.end())
                err(DiagCode::kPlanStructure, r, tb.id, -1,
                    "remote buffer " + std::to_string(id) + " is referred to by " +
                        channelTypeName(rr.type) + " channels but does not list that access type");
            }
        int index = 0;
        for (const Op& o : tb.ops) {
          checkOp(r, tb, o, index++);
          for (const Op& inner : o.ops) checkOp(r, tb, inner, index++);
        }
      }
    }
    // Chunk counts against the collective: one chunk size for every buffer,
    // the same on every rank.
    const bool known =
        coll == "allreduce" || coll == "allgather" || coll == "reducescatter" || coll == "alltoall";
    for (int r = 0; r < n_; ++r) {
      const Gpu& g = gpu(r);
      if (known && (g.inputChunks != gpu(0).inputChunks || g.outputChunks != gpu(0).outputChunks))
        err(DiagCode::kPlanStructure, r, -1, -1,
            "its chunk counts differ from rank 0's (" + coll + " gives every rank the same)");
      auto bad = [&](const std::string& want) {
        err(DiagCode::kPlanStructure, r, -1, -1,
            coll + " with " + std::to_string(g.inputChunks) + " input and " +
                std::to_string(g.outputChunks) + " output chunks: " + want);
      };
      const uint64_t in = g.inputChunks, outc = g.outputChunks, n = static_cast<uint64_t>(n_);
      if (coll == "allreduce" && in != outc) bad("allreduce needs as many of each");
      if (coll == "allgather" && outc != n * in)
        bad("allgather needs ranks x input chunks of output");
      if (coll == "reducescatter" && in != n * outc)
        bad("reducescatter needs ranks x output chunks of input");
      if (coll == "alltoall" && (in != outc || in % n != 0))
        bad("alltoall needs as many of each, a multiple of the ranks");
    }
  }

  void checkOp(int r, const Threadblock& tb, const Op& o, int index) {
    auto bad = [&](const std::string& m) {
      err(DiagCode::kPlanStructure, r, tb.id, index, std::string(opTypeName(o.type)) + ": " + m);
    };
    const ChannelType ct = o.channelType.value_or(ChannelType::kNone);
    const bool usesBuffers = o.src.has_value() || o.dst.has_value();
    int groups = (o.channelIds || usesBuffers ? 1 : 0) + (o.barrierId ? 1 : 0) +
                 (o.semaphoreIds ? 1 : 0) + (o.iterContext ? 1 : 0);
    if (groups > 1)
      bad("mixes fields MSCCL++ keeps in one union (channels and buffers, barrier, semaphores, "
          "pipeline)");
    if (o.channelIds) {
      const TbChannels* tc = tbChannels(tb, ct);
      for (int id : *o.channelIds)
        if (tc == nullptr || id < 0 || static_cast<size_t>(id) >= tc->ids.size())
          bad(std::string("channel ") + std::to_string(id) + " is not one of the threadblock's " +
              channelTypeName(ct) + " channels");
    }
    switch (o.type) {
      case OpType::kSignal:
      case OpType::kWait:
      case OpType::kRelaxedSignal:
      case OpType::kRelaxedWait:
      case OpType::kFlush:
        if ((ct != ChannelType::kMemory && ct != ChannelType::kPort) || !o.channelIds ||
            o.channelIds->empty())
          bad("needs channel_type memory or port and channel_ids");
        if (o.type == OpType::kFlush && ct != ChannelType::kPort) bad("flushes port channels only");
        break;
      case OpType::kBarrier:
        if (!o.barrierId || !o.numThreadblocks || *o.numThreadblocks < 1)
          bad("needs barrier_id and num_threadblocks");
        break;
      case OpType::kSemAcquire:
      case OpType::kSemRelease: {
        const size_t have = gpu(r).semaphores ? gpu(r).semaphores->size() : 0;
        if (!o.semaphoreIds || o.semaphoreIds->empty()) bad("needs semaphore_ids");
        if (o.semaphoreIds)
          for (int s : *o.semaphoreIds)
            if (s < 0 || static_cast<size_t>(s) >= have)
              bad("semaphore " + std::to_string(s) + " is not one of the rank's " +
                  std::to_string(have));
        break;
      }
      case OpType::kNop:
      case OpType::kPipeline:
        break;
      default:
        if (!o.src || !o.dst || o.src->empty() || o.dst->empty())
          bad("needs src_buff and dst_buff");
        break;
    }
    if (!o.src || !o.dst) return;
    // Entry shapes the executor's handlers read.
    auto kinds = [&](const std::vector<BufferRef>& v, size_t from, BufferRef::Kind k) {
      for (size_t i = from; i < v.size(); ++i)
        if (v[i].kind != k) return false;
      return true;
    };
    const auto L = BufferRef::Kind::kLocal, R = BufferRef::Kind::kRemote,
               S = BufferRef::Kind::kSwitch;
    const auto& src = *o.src;
    const auto& dst = *o.dst;
    auto shape = [&](bool ok, const char* want) {
      if (!ok) bad(std::string("its buffers are not ") + want);
    };
    switch (o.type) {
      case OpType::kCopy:
      case OpType::kCopyPackets:
      case OpType::kUnpackPackets:
        shape(src.size() == 1 && dst.size() == 1 && kinds(src, 0, L) && kinds(dst, 0, L),
              "one local source and one local destination");
        break;
      case OpType::kPut:
      case OpType::kPutWithSignal:
      case OpType::kPutWithSignalAndFlush:
      case OpType::kPutPackets:
        shape(src.size() == dst.size() && kinds(src, 0, L) && kinds(dst, 0, R),
              "local sources paired with as many remote destinations");
        break;
      case OpType::kReadPutPackets:
        shape(src.size() == 1 && kinds(src, 0, L) && kinds(dst, 0, R),
              "one local source and remote destinations");
        break;
      case OpType::kGet:
        shape(src.size() == dst.size() && kinds(src, 0, R) && kinds(dst, 0, L),
              "remote sources paired with as many local destinations");
        break;
      case OpType::kReduce:
      case OpType::kReducePackets:
        shape(src.size() >= 2 && kinds(src, 0, L) && dst.size() == 1 && kinds(dst, 0, L),
              "local sources and one local destination");
        break;
      case OpType::kReduceSend:
      case OpType::kReduceSendPackets:
        shape(src.size() >= 2 && kinds(src, 0, L) && dst.size() >= 2 && dst[0].kind == L &&
                  kinds(dst, 1, R),
              "local sources, a local destination, then remote ones");
        break;
      case OpType::kReduceCopyPackets:
        shape(src.size() >= 2 && kinds(src, 0, L) && dst.size() == 2 && kinds(dst, 0, L),
              "local sources, a local destination and a local packet copy");
        break;
      case OpType::kReduceCopySendPackets:
        shape(src.size() >= 2 && kinds(src, 0, L) && dst.size() >= 2 && dst[0].kind == L &&
                  dst[1].kind == L && kinds(dst, 2, R),
              "local sources, a local destination, a local packet copy, then remote ones");
        break;
      case OpType::kReadReduce:
        shape(src.size() >= 2 && src[0].kind == L && kinds(src, 1, R) && dst.size() == 1 &&
                  dst[0].kind == L,
              "a local source, remote ones and one local destination");
        break;
      case OpType::kReadReduceSend:
        shape(src.size() >= 2 && src[0].kind == L && kinds(src, 1, R) && dst[0].kind == L &&
                  kinds(dst, 1, R),
              "a local source, remote ones, a local destination, then remote ones");
        break;
      case OpType::kMultiLoadReduceStore:
        shape(src.size() == 1 && dst.size() == 1 && kinds(src, 0, S) && kinds(dst, 0, S),
              "one switch source and one switch destination");
        break;
      case OpType::kMultiStore:
        shape(src.size() == 1 && dst.size() == 1 && kinds(src, 0, L) && kinds(dst, 0, S),
              "one local source and one switch destination");
        break;
      default:
        break;
    }
    // Each entry resolves, and lies inside its buffer.
    for (int side = 0; side < 2; ++side) {
      const auto& v = side == 0 ? src : dst;
      for (size_t i = 0; i < v.size(); ++i) {
        auto t = resolveRef(r, tb, o, v[i]);
        if (!t) {
          bad(whyNot_);
          continue;
        }
        const uint64_t have = chunksOf(t->first, t->second);
        if (uint64_t{v[i].index} + v[i].size > have)
          bad(std::string(side == 0 ? "src_buff[" : "dst_buff[") + std::to_string(i) +
              "] covers chunks " + std::to_string(v[i].index) + ".." +
              std::to_string(uint64_t{v[i].index} + v[i].size) + " of rank " +
              std::to_string(t->first) + "'s " + bufferTypeName(t->second) + " buffer, which has " +
              std::to_string(have));
        if (v[i].size != v[0].size)
          bad("its entries cover different numbers of chunks (" + std::to_string(v[0].size) +
              " and " + std::to_string(v[i].size) + ")");
        if (packetForm(o, side == 0, i) && t->second != BufferType::kScratch)
          bad(std::string(side == 0 ? "src_buff[" : "dst_buff[") + std::to_string(i) +
              "] holds packets, which live in scratch, not the " + bufferTypeName(t->second) +
              " buffer");
      }
    }
    if (src.size() > 0 && dst.size() > 0 && src[0].size != dst[0].size)
      bad("its sources and destinations cover different numbers of chunks");
  }

  // The (rank, buffer type) an entry names, or nullopt with whyNot_ set.
  std::optional<std::pair<int, BufferType>> resolveRef(int r, const Threadblock& tb, const Op& o,
                                                       const BufferRef& b) {
    if (b.kind == BufferRef::Kind::kLocal) return std::make_pair(r, b.type);
    const ChannelType ct = o.channelType.value_or(ChannelType::kNone);
    if (b.kind == BufferRef::Kind::kRemote) {
      const TbRemoteRefs* refs = tbRefs(tb, ct);
      if (ct == ChannelType::kNone || refs == nullptr || b.id < 0 ||
          static_cast<size_t>(b.id) >= refs->ids.size()) {
        whyNot_ = "buffer_id " + std::to_string(b.id) + " is not one of the threadblock's " +
                  channelTypeName(ct) + " remote buffers";
        return std::nullopt;
      }
      const int gid = refs->ids[static_cast<size_t>(b.id)];
      if (gid < 0 || static_cast<size_t>(gid) >= gpu(r).remoteBuffers.size()) {
        whyNot_ = "remote buffer " + std::to_string(gid) + " does not exist";
        return std::nullopt;
      }
      const RemoteBuffer& rb = gpu(r).remoteBuffers[static_cast<size_t>(gid)];
      if (rb.rank < 0 || rb.rank >= n_) {
        whyNot_ = "remote buffer " + std::to_string(gid) + " is on no rank";
        return std::nullopt;
      }
      return std::make_pair(rb.rank, rb.type);
    }
    const TbChannels* sw = tbChannels(tb, ChannelType::kSwitch);
    auto all = switches(r);
    if (sw == nullptr || b.id < 0 || static_cast<size_t>(b.id) >= sw->ids.size() ||
        sw->ids[static_cast<size_t>(b.id)] < 0 ||
        static_cast<size_t>(sw->ids[static_cast<size_t>(b.id)]) >= all.size()) {
      whyNot_ = "switch_channel_id " + std::to_string(b.id) +
                " is not one of the threadblock's switch channels";
      return std::nullopt;
    }
    return std::make_pair(r, all[static_cast<size_t>(sw->ids[static_cast<size_t>(b.id)])].type);
  }

  void limits() {
    auto warn = [&](int r, int t, int i, const std::string& m) {
      err(DiagCode::kPlanLimit, r, t, i, m);
    };
    if (p_.threadsPerBlock() > 1024 || p_.threadsPerBlock() < 1)
      warn(-1, -1, -1,
           "num_threads_per_block " + std::to_string(p_.threadsPerBlock()) +
               ": the kernel is declared __launch_bounds__(1024, 1)");
    for (int r = 0; r < n_; ++r) {
      const Gpu& g = gpu(r);
      if (g.inputChunks == 0 || g.outputChunks == 0)
        warn(r, -1, -1,
             "input_chunks or output_chunks is 0: MSCCL++'s message size check divides by both");
      // Threadblocks past MAX_OPERATION: one warning per rank, naming the
      // largest (a converted plan may have dozens).
      int over = 0, worst = -1;
      size_t most = 0;
      for (const Threadblock& tb : g.threadblocks) {
        size_t flat = 0;
        for (const Op& o : tb.ops) flat += 1 + o.ops.size();
        if (flat > kMaxOperations) ++over;
        if (flat > most) most = flat, worst = tb.id;
      }
      if (over > 0)
        warn(r, worst, -1,
             std::to_string(over) + " threadblock(s) have more than MAX_OPERATION " +
                 std::to_string(kMaxOperations) +
                 " operations (pipelines flattened), which MSCCL++'s executor refuses; this one " +
                 std::to_string(most));
      for (const Threadblock& tb : g.threadblocks) {
        for (const TbChannels& c : tb.channels)
          if (c.ids.size() > kMaxChannels)
            warn(r, tb.id, -1,
                 std::to_string(c.ids.size()) + " " + channelTypeName(c.type) +
                     " channels: more than MAX_CHANNEL " + std::to_string(kMaxChannels) +
                     " overflow the executor's table silently");
        if (tb.remoteRefs)
          for (const TbRemoteRefs& rr : *tb.remoteRefs)
            if (rr.ids.size() > kMaxChannels)
              warn(r, tb.id, -1,
                   std::to_string(rr.ids.size()) + " remote buffers for " +
                       channelTypeName(rr.type) + " channels: more than MAX_CHANNEL " +
                       std::to_string(kMaxChannels) + " overflow silently");
        int index = 0;
        auto one = [&](const Op& o, int i) {
          if (o.channelIds && o.channelIds->size() > kMaxChannelsPerOp)
            warn(r, tb.id, i,
                 std::to_string(o.channelIds->size()) +
                     " channels in one op: more than MAX_CHANNEL_PER_OPERATION " +
                     std::to_string(kMaxChannelsPerOp));
          for (const auto* v : {&o.src, &o.dst})
            if (*v && (*v)->size() > kMaxBufferEntries)
              warn(r, tb.id, i,
                   std::to_string((*v)->size()) + " buffer entries: an op holds at most " +
                       std::to_string(kMaxBufferEntries) +
                       " (MAX_LOCAL_BUFFER_PER_OPERATION 2 + MAX_CHANNEL_PER_OPERATION 8)");
          if (o.barrierId && (*o.barrierId < 0 || *o.barrierId >= kMaxBarriers))
            warn(r, tb.id, i,
                 "barrier_id " + std::to_string(*o.barrierId) + ": MAX_DEVICE_SYNCERS is " +
                     std::to_string(kMaxBarriers));
          if (o.semaphoreIds && o.semaphoreIds->size() > kMaxSemaphoresPerOp)
            warn(r, tb.id, i,
                 std::to_string(o.semaphoreIds->size()) +
                     " semaphores in one op: MAX_DEVICE_SEMAPHORES is " +
                     std::to_string(kMaxSemaphoresPerOp));
          if (o.reduceOp && *o.reduceOp != "sum")
            err(DiagCode::kPlanIgnored, r, tb.id, i,
                "reduce_op \"" + *o.reduceOp +
                    "\": MSCCL++'s executor does not read it and always sums");
          if (o.type == OpType::kFlush && !o.dst)
            err(DiagCode::kPlanIgnored, r, tb.id, i,
                "a flush without dst_buff flushes nothing in MSCCL++'s executor (its handler "
                "loops over the destinations)");
          if (isPacketOp(o.type) && !p_.packets())
            err(DiagCode::kPlanIgnored, r, tb.id, i,
                std::string(opTypeName(o.type)) + " on a \"" + p_.protocol +
                    "\" plan: only protocol LL lays scratch out for packets");
        };
        for (const Op& o : tb.ops) {
          one(o, index++);
          for (const Op& inner : o.ops) one(inner, index++);
        }
      }
    }
  }

  // --- 2. execution ---
  void chooseUnits() {
    size_t u = 1;
    for (const Gpu& g : p_.gpus)
      for (const Threadblock& tb : g.threadblocks)
        for (const Op& o : tb.ops) {
          auto add = [&](const Op& x) {
            if (x.tbg && x.tbg->tbgSize > 0 && u < 4096)
              u = std::lcm(u, static_cast<size_t>(x.tbg->tbgSize));
          };
          add(o);
          for (const Op& inner : o.ops) add(inner);
        }
    while (u < static_cast<size_t>(std::max(1, opt_.leastUnitsPerChunk))) u *= 2;
    U_ = opt_.unitsPerChunk > 0 ? static_cast<size_t>(opt_.unitsPerChunk) : u;
    out_.unitsPerChunk = static_cast<int>(U_);
  }

  void build() {
    // What the symbolic run can hold: units of memory, and steps (pipelines
    // unrolled). Past them the plan is refused rather than run for ever.
    uint64_t cells = 0;
    for (const Gpu& g : p_.gpus)
      cells += (uint64_t{g.inputChunks} + g.outputChunks + 2 * uint64_t{g.scratchChunks}) * U_;
    if (cells > kMostCells)
      return err(DiagCode::kPlanStructure, -1, -1, -1,
                 "too large to verify: " + std::to_string(cells) + " units of " +
                     std::to_string(p_.alignment()) + " bytes over the ranks' buffers (at " +
                     std::to_string(U_) + " per chunk); the verifier runs at most " +
                     std::to_string(kMostCells));
    uint64_t steps = 0;
    int global = 0;
    for (int r = 0; r < n_; ++r)
      for (const Threadblock& t : gpu(r).threadblocks) {
        Tb tb;
        tb.rank = r;
        tb.id = t.id;
        tb.global = global++;
        int index = 0;
        for (const Op& o : t.ops) {
          const int at = index++;
          tb.steps.push_back({&o, at, -1, 0});
          if (o.type != OpType::kPipeline) continue;
          const int first = index;
          index += static_cast<int>(o.ops.size());
          // nIterations = ceil(num_chunks x chunk / unit_size), in units.
          const uint64_t unit = o.iterContext->unitSize / p_.alignment();
          if (unit == 0 || o.iterContext->unitSize % p_.alignment() != 0) {
            err(DiagCode::kPlanStructure, r, t.id, at,
                "pipeline unit_size " + std::to_string(o.iterContext->unitSize) +
                    " is not a multiple of buffer_alignment " + std::to_string(p_.alignment()));
            continue;
          }
          const uint64_t total = uint64_t{o.iterContext->numChunks} * U_;
          const uint64_t iters = std::max<uint64_t>(1, (total + unit - 1) / unit);
          steps += iters * o.ops.size();
          if (steps > kMostSteps) {
            err(DiagCode::kPlanStructure, r, t.id, at,
                "too large to verify: pipelines unroll to more than " + std::to_string(kMostSteps) +
                    " steps");
            return;
          }
          for (uint64_t it = 0; it < iters; ++it)
            for (size_t k = 0; k < o.ops.size(); ++k)
              tb.steps.push_back({&o.ops[k], first + static_cast<int>(k),
                                  static_cast<int64_t>(it * unit), static_cast<size_t>(unit)});
        }
        tbs_.push_back(std::move(tb));
        threadblock_.push_back(&t);
      }
    for (Tb& tb : tbs_) {
      tb.vc.assign(tbs_.size(), 0);
      tb.pending.assign(tbs_.size(), 0);
    }
    // Memory: input, output, scratch and packets of each rank, in units; an
    // in-place call's input is part of its output, as NCCL lays it out.
    mem_.resize(static_cast<size_t>(n_));
    for (int r = 0; r < n_; ++r) {
      const Gpu& g = gpu(r);
      auto& m = mem_[static_cast<size_t>(r)];
      m[kIn].resize(g.inputChunks * U_);
      m[kOut].resize(g.outputChunks * U_);
      m[kScratch].resize(g.scratchChunks * U_);
      m[kPackets].resize(g.scratchChunks * U_);
      for (size_t u = 0; u < g.inputChunks * U_; ++u) {
        auto [buf, off] = physical(r, BufferType::kInput, u);
        Cell& c = m[static_cast<size_t>(buf)][off];
        c.defined = true;
        c.sum = {static_cast<uint32_t>(inputId(r, u))};
      }
    }
  }
  size_t inUnits(int r) const { return gpu(r).inputChunks * U_; }
  size_t inputId(int r, size_t u) const { return static_cast<size_t>(r) * inUnits(0) + u; }
  // An in-place call's input, placed in its output.
  std::optional<size_t> inputInOutput(int r) const {
    if (!p_.inplace) return std::nullopt;
    const std::string& c = p_.collective;
    if (c == "allgather") return static_cast<size_t>(r) * inUnits(r);
    if (c == "reducescatter") return std::nullopt;  // the output lies in the input
    return size_t{0};
  }
  std::pair<int, size_t> physical(int r, BufferType t, size_t u) const {
    if (p_.inplace && p_.collective == "reducescatter" && t == BufferType::kOutput)
      return {kIn, static_cast<size_t>(r) * gpu(r).outputChunks * U_ + u};
    if (t == BufferType::kInput)
      if (auto at = inputInOutput(r)) return {kOut, *at + u};
    return {t == BufferType::kInput ? kIn : t == BufferType::kOutput ? kOut : kScratch, u};
  }

  // The ranks and units one entry of a step touches (after the threadblock
  // group's slice and the pipeline's window); a switch entry, every member.
  std::vector<Target> targets(const Tb& tb, const Tb::Step& s, bool src, size_t i) {
    const Op& o = *s.op;
    const BufferRef& b = (src ? *o.src : *o.dst)[i];
    auto where = resolveRef(tb.rank, *threadblock_[static_cast<size_t>(tb.global)], o, b);
    std::vector<int> ranks{where->first};
    if (b.kind == BufferRef::Kind::kSwitch) {
      const TbChannels* sw =
          tbChannels(*threadblock_[static_cast<size_t>(tb.global)], ChannelType::kSwitch);
      ranks = switches(tb.rank)[static_cast<size_t>(sw->ids[static_cast<size_t>(b.id)])].ranks;
    }
    size_t first = b.index * U_, len = b.size * U_;
    if (o.tbg && o.tbg->tbgSize > 1) {
      const size_t n = static_cast<size_t>(o.tbg->tbgSize), k = static_cast<size_t>(o.tbg->tbId);
      const size_t each = len / n, extra = len % n;
      first += k * each + std::min(k, extra);
      len = each + (k < extra ? 1 : 0);
    }
    if (s.window >= 0 && !isPacketOp(o.type)) {
      const size_t w = static_cast<size_t>(s.window);
      const size_t from = std::min(w, len), to = std::min(w + s.windowLen, len);
      first += from;
      len = to - from;
    }
    const bool pkt = packetForm(o, src, i);
    std::vector<Target> out;
    for (int q : ranks) {
      Target t;
      t.rank = q;
      t.type = where->second;
      t.len = len;
      if (pkt) {
        t.buf = kPackets;
        t.first = first;
      } else {
        auto [buf, off] = physical(q, where->second, first);
        t.buf = buf;
        t.first = off;
      }
      out.push_back(t);
    }
    return out;
  }
  Cell& cell(const Target& t, size_t j) {
    return mem_[static_cast<size_t>(t.rank)][static_cast<size_t>(t.buf)][t.first + j];
  }

  // Where a channel's signals go: the peer's paired channel (the k-th of
  // this type from the peer to this rank), or -1.
  int pairedChannel(int r, ChannelType t, int c, int* peer) const {
    auto mine = peers(r, t);
    const int p = mine[static_cast<size_t>(c)];
    *peer = p;
    int k = 0;
    for (int i = 0; i < c; ++i) k += mine[static_cast<size_t>(i)] == p ? 1 : 0;
    auto theirs = peers(p, t);
    for (size_t i = 0; i < theirs.size(); ++i)
      if (theirs[i] == r && k-- == 0) return static_cast<int>(i);
    return -1;
  }
  int gpuChannel(const Tb& tb, ChannelType t, int local) const {
    return tbChannels(*threadblock_[static_cast<size_t>(tb.global)], t)
        ->ids[static_cast<size_t>(local)];
  }
  using SemKey = std::tuple<int, int, int>;  // receiving rank, channel type, its channel

  // The link an entry's traffic with `peer` takes (TracedOp): the k-th
  // channel of the op's type between the two ranks, when the entry's
  // channel is one to `peer`; else the first.
  int link(const Tb& tb, const Op& o, size_t i, int peer) const {
    const ChannelType t = o.channelType.value_or(ChannelType::kNone);
    const int type = t == ChannelType::kMemory ? 0 : t == ChannelType::kPort ? 1 : 2;
    if (type == 2 || !o.channelIds || o.channelIds->empty()) return type;
    const int c = gpuChannel(tb, t, (*o.channelIds)[std::min(i, o.channelIds->size() - 1)]);
    const std::vector<int> mine = peers(tb.rank, t);
    if (mine[static_cast<size_t>(c)] != peer) return type;
    const int k = static_cast<int>(std::count(mine.begin(), mine.begin() + c, peer));
    return 3 * k + type;
  }

  static void join(std::vector<uint32_t>& into, const std::vector<uint32_t>& from) {
    for (size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], from[i]);
  }
  // The block's threads meet (a nop, a barrier): earlier ops are ordered
  // before later ones, and what waits brought reaches every thread.
  static void blockSync(Tb& tb) {
    join(tb.vc, tb.pending);
    tb.vc[static_cast<size_t>(tb.global)] = tb.counter;
  }
  // The clock a signal carries: what the block has synchronised, plus the
  // signalling op itself (a put-with-signal's own data).
  static std::vector<uint32_t> released(const Tb& tb, bool includeThisOp) {
    std::vector<uint32_t> v = tb.vc;
    if (includeThisOp) v[static_cast<size_t>(tb.global)] = tb.counter;
    return v;
  }

  // Whether the step can run now (waits, semaphores, packets).
  bool enabled(const Tb& tb, const Tb::Step& s, std::string* why) {
    const Op& o = *s.op;
    switch (o.type) {
      case OpType::kWait:
      case OpType::kRelaxedWait: {
        const ChannelType t = *o.channelType;
        for (int local : *o.channelIds) {
          const int c = gpuChannel(tb, t, local);
          auto it = tokens_.find({tb.rank, static_cast<int>(t), c});
          if (it == tokens_.end() || it->second.empty()) {
            int peer = -1;
            const int paired = pairedChannel(tb.rank, t, c, &peer);
            *why = std::string("a signal on ") + channelTypeName(t) + " channel " +
                   std::to_string(c) + " from rank " + std::to_string(peer) +
                   (paired < 0 ? " (rank " + std::to_string(peer) +
                                     " has no channel paired with it, so none can come)"
                               : " (its channel " + std::to_string(paired) + ")");
            return false;
          }
        }
        return true;
      }
      case OpType::kSemAcquire:
        for (int sid : *o.semaphoreIds)
          if (sems_[{tb.rank, sid}].empty()) {
            *why = "semaphore " + std::to_string(sid) + " to be released";
            return false;
          }
        return true;
      default:
        break;
    }
    if (!isPacketOp(o.type)) return true;
    for (size_t i = 0; i < o.src->size(); ++i) {
      if (!waitsForFlags(o, i)) continue;
      for (const Target& t : targets(tb, s, true, i))
        for (size_t j = 0; j < t.len; ++j)
          if (!cell(t, j).packet) {
            *why = "packets in rank " + std::to_string(t.rank) + "'s scratch chunk " +
                   std::to_string((t.first + j) / U_) + " (none written yet)";
            return false;
          }
    }
    return true;
  }

  void race(const Tb& tb, const Tb::Step& s, const Epoch& other, const char* what, const Target& t,
            size_t j) {
    const std::pair<int, int> key{tb.global, s.index};
    if (races_ >= kMaxReports ||
        !raced_.insert({key, {other.tb, static_cast<int>(other.op)}}).second)
      return;
    ++races_;
    const Tb& o = tbs_[static_cast<size_t>(other.tb)];
    const Tb::Step* os = stepOf_[{other.tb, other.op}];
    static const char* kBuf[] = {"input", "output", "scratch", "scratch packets"};
    err(DiagCode::kPlanRace, tb.rank, tb.id, s.index,
        std::string(opTypeName(s.op->type)) + " " + what + " rank " + std::to_string(t.rank) +
            "'s " + kBuf[t.buf] + " chunk " + std::to_string((t.first + j) / U_) +
            " unordered with rank " + std::to_string(o.rank) + " tb " + std::to_string(o.id) +
            " op " + std::to_string(os ? os->index : -1) + " (" +
            (os ? opTypeName(os->op->type) : "?") +
            "): no signal/wait, barrier, semaphore or nop orders them");
  }
  bool before(const Epoch& e, const Tb& tb) const {
    return tb.vc[static_cast<size_t>(e.tb)] >= e.op;
  }
  // `flagged`: a packet read that waited for its flag (ordered after the
  // packet's write, for this element).
  Value read(Tb& tb, const Tb::Step& s, const Target& t, size_t j, bool flagged) {
    Cell& c = cell(t, j);
    const Epoch me{tb.global, tb.counter};
    if (c.write.valid() && !(c.write == me) && !(flagged && c.packetWrite) && !before(c.write, tb))
      race(tb, s, c.write, "reads", t, j);
    bool have = false;
    for (Epoch& e : c.reads)
      if (e.tb == me.tb) e = me, have = true;
    if (!have) c.reads.push_back(me);
    Value v{c.defined, c.sum, {}};
    if (flagged) {
      v.chain = c.chain;
      addToChain(v.chain, c.write);
    }
    return v;
  }
  void write(Tb& tb, const Tb::Step& s, const Target& t, size_t j, const Value& v, bool packet) {
    Cell& c = cell(t, j);
    const Epoch me{tb.global, tb.counter};
    auto ordered = [&](const Epoch& e) {
      return e == me || before(e, tb) ||
             std::find(v.chain.begin(), v.chain.end(), e) != v.chain.end();
    };
    if (c.write.valid() && !ordered(c.write)) race(tb, s, c.write, "writes", t, j);
    for (const Epoch& e : c.reads)
      if (!ordered(e)) race(tb, s, e, "overwrites what is read of", t, j);
    c.reads.clear();
    c.write = me;
    c.packetWrite = packet;
    c.defined = v.defined;
    c.sum = v.sum;
    c.chain.clear();
    if (packet) {
      c.packet = true;
      c.chain = v.chain;
    }
  }

  void step(Tb& tb, const Tb::Step& s) {
    const Op& o = *s.op;
    ++tb.counter;
    stepOf_[{tb.global, tb.counter}] = &s;
    switch (o.type) {
      case OpType::kNop:
        blockSync(tb);
        return;
      case OpType::kPipeline:
        return;
      case OpType::kSignal:
      case OpType::kRelaxedSignal:
      case OpType::kPutWithSignal:
      case OpType::kPutWithSignalAndFlush:
        break;
      case OpType::kWait:
      case OpType::kRelaxedWait: {
        for (int local : *o.channelIds) {
          const ChannelType t = *o.channelType;
          auto& q = tokens_[{tb.rank, static_cast<int>(t), gpuChannel(tb, t, local)}];
          Token tok = std::move(q.front());
          q.pop_front();
          if (tok.strong && o.type == OpType::kWait) join(tb.pending, tok.vc);
        }
        return;
      }
      case OpType::kSemAcquire:
        for (int sid : *o.semaphoreIds) {
          auto& q = sems_[{tb.rank, sid}];
          join(tb.pending, q.front());
          q.pop_front();
        }
        return;
      case OpType::kSemRelease:
        for (int sid : *o.semaphoreIds) sems_[{tb.rank, sid}].push_back(released(tb, true));
        return;
      case OpType::kFlush:
        return;
      default:
        break;
    }
    if (o.type == OpType::kSignal || o.type == OpType::kRelaxedSignal) {
      signal(tb, o, o.type == OpType::kSignal, false);
      return;
    }
    dataOp(tb, s);
    // A put with signal signals after its data, on port channels (on
    // memory channels the variants are plain puts).
    if ((o.type == OpType::kPutWithSignal || o.type == OpType::kPutWithSignalAndFlush) &&
        o.channelType == ChannelType::kPort && o.channelIds)
      signal(tb, o, true, true);
  }

  void signal(Tb& tb, const Op& o, bool strong, bool includeThisOp) {
    const ChannelType t = *o.channelType;
    for (int local : *o.channelIds) {
      int peer = -1;
      const int paired = pairedChannel(tb.rank, t, gpuChannel(tb, t, local), &peer);
      if (paired < 0) continue;  // no one can wait for it
      tokens_[{peer, static_cast<int>(t), paired}].push_back(
          Token{strong, strong ? released(tb, includeThisOp) : std::vector<uint32_t>()});
    }
  }

  void dataOp(Tb& tb, const Tb::Step& s) {
    const Op& o = *s.op;
    const auto& src = *o.src;
    const auto& dst = *o.dst;
    std::vector<std::vector<Target>> in, out;
    for (size_t i = 0; i < src.size(); ++i) in.push_back(targets(tb, s, true, i));
    for (size_t i = 0; i < dst.size(); ++i) out.push_back(targets(tb, s, false, i));
    const size_t len = in[0][0].len;
    // Copies pair entries (put, get, ppkt: src[i] -> dst[i]); everything
    // else computes one value from its sources and stores it everywhere.
    const bool paired = o.type == OpType::kPut || o.type == OpType::kPutWithSignal ||
                        o.type == OpType::kPutWithSignalAndFlush || o.type == OpType::kPutPackets ||
                        o.type == OpType::kGet;
    const bool sums = o.type == OpType::kReduce || o.type == OpType::kReduceSend ||
                      o.type == OpType::kReadReduce || o.type == OpType::kReadReduceSend ||
                      o.type == OpType::kReducePackets || o.type == OpType::kReduceSendPackets ||
                      o.type == OpType::kReduceCopyPackets ||
                      o.type == OpType::kReduceCopySendPackets ||
                      o.type == OpType::kMultiLoadReduceStore;
    if (trace_) {
      TracedOp t{tb.rank, tb.id, &o, s.index, in, out, {}, {}, paired, sums};
      for (size_t i = 0; i < src.size(); ++i) t.inLink.push_back(link(tb, o, i, in[i][0].rank));
      for (size_t i = 0; i < dst.size(); ++i) t.outLink.push_back(link(tb, o, i, out[i][0].rank));
      trace_->dataOp(t);
    }
    for (size_t j = 0; j < len; ++j) {
      if (paired) {
        for (size_t i = 0; i < src.size(); ++i) {
          Value v = read(tb, s, in[i][0], j, waitsForFlags(o, i));
          for (const Target& t : out[i]) write(tb, s, t, j, v, packetForm(o, false, i));
        }
        continue;
      }
      Value v;
      bool first = true;
      for (size_t i = 0; i < src.size(); ++i)
        for (const Target& t : in[i]) {
          Value x = read(tb, s, t, j, waitsForFlags(o, i));
          if (first || !sums) {
            v = std::move(x);
            first = false;
            continue;
          }
          v.defined = v.defined && x.defined;
          v.sum.insert(v.sum.end(), x.sum.begin(), x.sum.end());
          std::sort(v.sum.begin(), v.sum.end());
          for (const Epoch& e : x.chain) addToChain(v.chain, e);
        }
      for (size_t i = 0; i < dst.size(); ++i)
        for (const Target& t : out[i]) write(tb, s, t, j, v, packetForm(o, false, i));
    }
  }

  // Runs the threadblocks in lockstep, one op each per round (the order
  // a lowering replays: close to how they run, so receives and the sends
  // that forward them come in turn), until all are done or none can move
  // (a deadlock, reported per stuck op).
  void execute() {
    std::vector<Tb*> active;
    for (Tb& tb : tbs_)
      if (!tb.steps.empty()) active.push_back(&tb);
    bool moved = true;
    while (moved) {
      moved = false;
      std::string why;
      for (Tb* tb : active) {
        if (tb->pc >= tb->steps.size()) continue;  // a barrier released it this round
        const Tb::Step& s = tb->steps[tb->pc];
        if (s.op->type == OpType::kBarrier) {
          moved = arriveAtBarrier(*tb, s) || moved;
        } else if (enabled(*tb, s, &why)) {
          step(*tb, s);
          ++tb->pc;
          moved = true;
        }
      }
      std::erase_if(active, [](const Tb* tb) { return tb->pc >= tb->steps.size(); });
      if (trace_) trace_->endRound();
    }
    for (Tb& tb : tbs_) {
      if (tb.pc >= tb.steps.size()) continue;
      const Tb::Step& s = tb.steps[tb.pc];
      std::string why;
      if (s.op->type == OpType::kBarrier) {
        auto& b = barriers_[{tb.rank, *s.op->barrierId}];
        why = "barrier " + std::to_string(*s.op->barrierId) + ": " +
              std::to_string(b.arrived.size()) + " of " + std::to_string(*s.op->numThreadblocks) +
              " threadblocks arrived";
      } else {
        (void)enabled(tb, s, &why);
      }
      err(DiagCode::kPlanDeadlock, tb.rank, tb.id, s.index,
          std::string(opTypeName(s.op->type)) + " waits for " + why + ", which never comes");
    }
  }

  struct Barrier {
    std::vector<int> arrived;  // global threadblocks
    int want = 0;
  };
  // A threadblock reaches a barrier; the last of its threadblocks releases
  // them all, their clocks joined. False while it waits.
  bool arriveAtBarrier(Tb& tb, const Tb::Step& s) {
    auto& b = barriers_[{tb.rank, *s.op->barrierId}];
    if (!tb.atBarrier) {
      if (b.arrived.empty()) b.want = *s.op->numThreadblocks;
      if (b.want != *s.op->numThreadblocks)
        err(DiagCode::kPlanDeadlock, tb.rank, tb.id, s.index,
            "barrier " + std::to_string(*s.op->barrierId) + " with num_threadblocks " +
                std::to_string(*s.op->numThreadblocks) + " meets threadblocks that wait for " +
                std::to_string(b.want));
      ++tb.counter;
      stepOf_[{tb.global, tb.counter}] = &s;
      blockSync(tb);
      tb.atBarrier = true;
      b.arrived.push_back(tb.global);
      if (static_cast<int>(b.arrived.size()) < b.want) return false;
      std::vector<uint32_t> all(tbs_.size(), 0);
      for (int g : b.arrived) join(all, tbs_[static_cast<size_t>(g)].vc);
      for (int g : b.arrived) {
        Tb& m = tbs_[static_cast<size_t>(g)];
        join(m.vc, all);
        m.atBarrier = false;
        ++m.pc;
      }
      b.arrived.clear();
      return true;
    }
    return false;
  }

  // --- 4. the post-condition ---
  void postcondition() {
    const std::string& c = p_.collective;
    if (c != "allreduce" && c != "allgather" && c != "reducescatter" && c != "alltoall") {
      Location l;
      l.file = file_;
      d_.add(DiagCode::kSemanticsUnproven, l,
             "collective \"" + c +
                 "\": no post-condition for it; structure, deadlock and races were checked");
      return;
    }
    out_.semanticsChecked = true;
    int reported = 0;
    const size_t inU = inUnits(0);
    for (int r = 0; r < n_ && reported < kMaxReports; ++r) {
      const size_t outU = gpu(r).outputChunks * U_;
      for (size_t u = 0; u < outU && reported < kMaxReports; ++u) {
        std::vector<uint32_t> want;
        if (c == "allreduce") {
          for (int q = 0; q < n_; ++q) want.push_back(static_cast<uint32_t>(inputId(q, u)));
        } else if (c == "allgather") {
          want.push_back(static_cast<uint32_t>(u));  // rank u / in, unit u % in
        } else if (c == "reducescatter") {
          for (int q = 0; q < n_; ++q)
            want.push_back(static_cast<uint32_t>(static_cast<size_t>(q) * inU + r * outU + u));
        } else {
          const size_t block = inU / static_cast<size_t>(n_);
          const size_t q = u / block, j = u % block;
          want.push_back(static_cast<uint32_t>(q * inU + static_cast<size_t>(r) * block + j));
        }
        std::sort(want.begin(), want.end());
        auto [buf, off] = physical(r, BufferType::kOutput, u);
        const Cell& got = mem_[static_cast<size_t>(r)][static_cast<size_t>(buf)][off];
        if (got.defined && got.sum == want) continue;
        ++reported;
        wrongChunk(r, u, got, want);
        u = (u / U_ + 1) * U_ - 1;  // one report per chunk
      }
    }
    // An out-of-place call leaves its input as it was.
    if (!p_.inplace)
      for (int r = 0; r < n_ && reported < kMaxReports; ++r)
        for (size_t u = 0; u < inUnits(r); ++u) {
          const Cell& got = mem_[static_cast<size_t>(r)][kIn][u];
          if (got.defined && got.sum == std::vector<uint32_t>{static_cast<uint32_t>(inputId(r, u))})
            continue;
          ++reported;
          err(DiagCode::kInputModified, r, -1, -1,
              "input chunk " + std::to_string(u / U_) + " is overwritten by an out-of-place call");
          break;
        }
  }
  std::string describe(const std::vector<uint32_t>& ids) const {
    if (ids.empty()) return "nothing";
    std::map<std::pair<size_t, size_t>, int> count;  // (rank, input chunk) -> times
    const size_t inU = inUnits(0);
    for (uint32_t id : ids) ++count[{id / inU, (id % inU) / U_}];
    std::string s;
    for (const auto& [k, times] : count) {
      if (!s.empty()) s += " + ";
      s += "rank " + std::to_string(k.first) + " input chunk " + std::to_string(k.second);
      if (times > 1) s += " x" + std::to_string(times);
    }
    return s;
  }
  void wrongChunk(int r, size_t u, const Cell& got, const std::vector<uint32_t>& want) {
    const std::string head = "output chunk " + std::to_string(u / U_) + " (unit " +
                             std::to_string(u % U_) + " of " + std::to_string(U_) + ") ";
    if (!got.defined) {
      err(DiagCode::kMissingContribution, r, -1, -1,
          head + "is never written with defined data; it should hold " + describe(want));
      return;
    }
    std::vector<uint32_t> missing, extra;
    std::set_difference(want.begin(), want.end(), got.sum.begin(), got.sum.end(),
                        std::back_inserter(missing));
    std::set_difference(got.sum.begin(), got.sum.end(), want.begin(), want.end(),
                        std::back_inserter(extra));
    DiagCode code = !missing.empty() && extra.empty() ? DiagCode::kMissingContribution
                    : missing.empty() && std::set<uint32_t>(got.sum.begin(), got.sum.end()).size() <
                                             got.sum.size()
                        ? DiagCode::kDuplicateContribution
                        : DiagCode::kWrongResult;
    // Located at the op that wrote it last, which may be another rank's put.
    const Tb::Step* last = got.write.valid() ? stepOf_[{got.write.tb, got.write.op}] : nullptr;
    if (last == nullptr)
      return err(code, r, -1, -1,
                 head + "holds " + describe(got.sum) + "; it should hold " + describe(want));
    const Tb& w = tbs_[static_cast<size_t>(got.write.tb)];
    err(code, w.rank, w.id, last->index,
        std::string(opTypeName(last->op->type)) + " writes rank " + std::to_string(r) + "'s " +
            head + "last: it holds " + describe(got.sum) + "; it should hold " + describe(want));
  }

  const Plan& p_;
  std::string file_;
  PlanOptions opt_;
  PlanReport& out_;
  DiagnosticList& d_;
  PlanTrace* trace_ = nullptr;
  int n_ = 0;
  size_t U_ = 8;
  std::string whyNot_;
  std::vector<Tb> tbs_;
  std::vector<const Threadblock*> threadblock_;  // by global index
  std::vector<std::array<std::vector<Cell>, 4>> mem_;
  std::map<SemKey, std::deque<Token>> tokens_;
  std::map<std::pair<int, int>, std::deque<std::vector<uint32_t>>> sems_;
  std::map<std::pair<int, int>, Barrier> barriers_;
  std::map<std::pair<int, uint32_t>, const Tb::Step*> stepOf_;
  std::set<std::pair<std::pair<int, int>, std::pair<int, int>>> raced_;
  int races_ = 0;

 public:
  // Semaphores start with their init values (releases with no clock).
  void seedSemaphores() {
    for (int r = 0; r < n_; ++r)
      if (gpu(r).semaphores)
        for (size_t s = 0; s < gpu(r).semaphores->size(); ++s)
          for (int k = 0; k < (*gpu(r).semaphores)[s]; ++k)
            sems_[{r, static_cast<int>(s)}].push_back(std::vector<uint32_t>(tbs_.size(), 0));
  }
};

}  // namespace plan_check

PlanReport plan_check::tracePlan(const ir::mscclpp::Plan& plan, const std::string& file,
                                 const PlanOptions& options, PlanTrace* trace) {
  PlanReport report;
  plan_check::Verifier v(plan, file, options, report, trace);
  v.run();
  report.diagnostics.sort();
  return report;
}

PlanReport verifyPlan(const ir::mscclpp::Plan& plan, const std::string& file,
                      const PlanOptions& options) {
  return plan_check::tracePlan(plan, file, options, nullptr);
}

}  // namespace chorus::verify
