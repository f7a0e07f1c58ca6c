// A proven MSCCL++ plan as a two-sided Algorithm (verify::lowerPlan).
//
// The plan's synchronisation (signals, waits, barriers, semaphores, nops,
// packet flags) exists to order memory accesses. The verifier runs the
// plan in one order that synchronisation allows and, having proven it
// race-free, knows every run computes what that one does. So the lowering
// replays that run as a data-flow program: each data operation becomes
// steps (a local copy or reduce in the threadblock's own IR threadblock; a
// put, get or remote read a send on the owner's connection threadblock and
// a receive on the other end's), and each step depends on the last writer
// of what it reads and, when it writes, on everything that read or wrote
// those units since: the hazards themselves rather than the signals that
// guarded them. Steps are emitted in the run's order, so every dependency,
// every threadblock's order and every connection's FIFO point backwards in
// that order: the program cannot deadlock, whatever the slots (a receive
// is emitted at the end of its send's round, or sooner when its rank
// touches what it writes). Two rewrites that keep that order then bring
// the program close to a hand-written one: a plan's slots are received in
// place (receiveInPlace), and receives forward what they got on their own
// threadblock (forwardInPlace). What the lowering builds is proven again
// by the algorithm verifier.
#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/check.h"
#include "ir/mscclpp_plan.h"
#include "verify/plan_trace.h"
#include "verify/plan_verifier.h"
#include "verify/verifier.h"

namespace chorus::verify {

// (A named namespace: the unity build joins this file with the verifier's.)
namespace plan_lower {

using ir::mscclpp::Plan;
using plan_check::Target;
using plan_check::TracedOp;

// A range of one IR buffer of a rank, in units.
struct Loc {
  ir::Buffer buf = ir::Buffer::kInput;
  size_t off = 0, len = 0;
  bool operator==(const Loc& o) const { return buf == o.buf && off == o.off && len == o.len; }
  bool operator!=(const Loc& o) const { return !(*this == o); }
  bool overlaps(const Loc& o) const {
    return buf == o.buf && off < o.off + o.len && o.off < off + len;
  }
};

class Lowerer final : public plan_check::PlanTrace {
 public:
  explicit Lowerer(const Plan& p) : p_(p), n_(static_cast<int>(p.gpus.size())) {}

  void begin(size_t unitsPerChunk) override {
    U_ = unitsPerChunk;
    a_.ranks.resize(static_cast<size_t>(n_));
    units_.resize(static_cast<size_t>(n_));
    temp_.assign(static_cast<size_t>(n_), 0);
    for (int r = 0; r < n_; ++r) {
      const auto& g = p_.gpus[static_cast<size_t>(r)];
      ir::Rank& k = a_.ranks[static_cast<size_t>(r)];
      k.id = r;
      k.inputChunks = chunks(g.inputChunks);
      k.outputChunks = chunks(g.outputChunks);
      for (const auto& t : g.threadblocks) home_[{r, t.id}] = newTb(r, -1, -1, 0);
    }
  }

  void dataOp(const TracedOp& t) override {
    if (!why_.empty() || t.in.empty() || t.in[0].empty() || t.in[0][0].len == 0) return;
    op_ = &t;
    if (t.paired) {
      for (size_t i = 0; i < t.in.size() && i < t.out.size(); ++i)
        for (const Target& d : t.out[i]) move(t.in[i][0], d, t.inLink[i], t.outLink[i]);
      return;
    }
    compute();
  }

  // The algorithm, or nullopt with why() set. `forward`: rings' receiving
  // and forwarding threadblocks merged (forwardInPlace).
  std::optional<ir::Algorithm> finish(bool forward) {
    endRound();
    if (!why_.empty()) return std::nullopt;
    receiveInPlace();
    if (forward) forwardInPlace();
    number();
    a_.name = p_.name;
    a_.collectiveName = p_.collective;
    a_.collective = parseCollective(p_.collective);
    a_.protocol = p_.packets() ? ir::Protocol::kLL : ir::Protocol::kSimple;
    a_.ngpus = n_;
    a_.nchannels = links_;
    a_.inplace = p_.inplace;
    a_.outofplace = !p_.inplace;
    a_.minBytes = p_.minMessageSize.value_or(0);
    const uint64_t most = p_.maxMessageSize.value_or(0);
    a_.maxBytes = most == UINT64_MAX ? 0 : most;
    int total = 1;
    for (ir::Rank& k : a_.ranks) {
      total = std::max({total, k.inputChunks, k.outputChunks});
      // Scratch: what the steps still use (slots received in place are not).
      size_t scratch = 0;
      for (const ir::Threadblock& tb : k.tbs)
        for (const ir::Step& x : tb.steps) {
          if (ir::readsSrc(x.type) && x.srcBuf == ir::Buffer::kScratch)
            scratch = std::max(scratch, static_cast<size_t>(x.srcOff + x.count));
          if ((ir::writesDst(x.type) || ir::readsDst(x.type)) && x.dstBuf == ir::Buffer::kScratch)
            scratch = std::max(scratch, static_cast<size_t>(x.dstOff + x.count));
        }
      k.scratchChunks = static_cast<int>(scratch);
      // Threadblocks with nothing to do go; dependencies follow the rest.
      std::vector<int> moved(k.tbs.size(), -1);
      std::vector<ir::Threadblock> kept;
      for (ir::Threadblock& tb : k.tbs)
        if (!tb.steps.empty()) {
          moved[static_cast<size_t>(tb.id)] = static_cast<int>(kept.size());
          tb.id = static_cast<int>(kept.size());
          kept.push_back(std::move(tb));
        }
      for (ir::Threadblock& tb : kept)
        for (ir::Step& s : tb.steps)
          if (s.depTb >= 0) s.depTb = moved[static_cast<size_t>(s.depTb)];
      k.tbs = std::move(kept);
    }
    a_.nchunksPerLoop = total;
    return std::move(a_);
  }
  const std::string& why() const { return why_; }
  const TracedOp* failedOp() const { return failed_; }

 private:
  int chunks(uint64_t planChunks) {
    const uint64_t u = planChunks * U_;
    if (u > INT_MAX) refuse("its buffers hold more units than an algorithm can index");
    return static_cast<int>(std::min<uint64_t>(u, INT_MAX));
  }
  void refuse(const std::string& why) {
    if (why_.empty()) {
      why_ = why;
      failed_ = op_;
    }
  }

  int newTb(int r, int sendPeer, int recvPeer, int channel) {
    auto& tbs = a_.ranks[static_cast<size_t>(r)].tbs;
    ir::Threadblock tb;
    tb.id = static_cast<int>(tbs.size());
    tb.sendPeer = sendPeer;
    tb.recvPeer = recvPeer;
    tb.channel = channel;
    tbs.push_back(tb);
    return tb.id;
  }
  // The threadblock of `r` that sends to (or receives from) `peer` on a link.
  int connTb(int r, int peer, int link, bool send) {
    auto [it, fresh] = conn_.try_emplace({r, peer, link, send}, -1);
    if (fresh) it->second = send ? newTb(r, peer, -1, link) : newTb(r, -1, peer, link);
    links_ = std::max(links_, link + 1);
    return it->second;
  }

  size_t scratchUnits(int r) const { return p_.gpus[static_cast<size_t>(r)].scratchChunks * U_; }
  Loc loc(const Target& t) {
    Loc l;
    l.off = t.first;
    l.len = t.len;
    switch (t.buf) {
      case plan_check::kIn:
        l.buf = ir::Buffer::kInput;
        break;
      case plan_check::kOut:
        l.buf = ir::Buffer::kOutput;
        break;
      case plan_check::kScratch:
        l.buf = ir::Buffer::kScratch;
        break;
      default:  // packets: the second part of scratch
        l.buf = ir::Buffer::kScratch;
        l.off += scratchUnits(t.rank);
    }
    return l;
  }
  // Units of scratch of the lowering's own (a value with nowhere local to
  // go), after the plan's scratch and packets.
  Loc temp(int r, size_t len) {
    Loc l{ir::Buffer::kScratch, 2 * scratchUnits(r) + temp_[static_cast<size_t>(r)], len};
    temp_[static_cast<size_t>(r)] += len;
    return l;
  }

  // src -> dst, one of them on the op's rank.
  void move(const Target& s, const Target& d, int inLink, int outLink) {
    const int r = op_->rank;
    if (s.rank == d.rank) {
      if (s.rank != r) return refuse("it copies between two buffers of another rank");
      if (!(loc(s) == loc(d))) local(ir::StepType::kCopy, loc(s), loc(d));
    } else if (s.rank == r) {
      transfer(r, loc(s), d.rank, loc(d), outLink, false);
    } else if (d.rank == r) {
      transfer(s.rank, loc(s), r, loc(d), inLink, false);
    } else {
      refuse("it moves data between two other ranks");
    }
  }

  // One value from the sources (summed, or the last), stored in every
  // destination: built in a local destination (else the lone local source
  // itself, else scratch of the lowering's own), then copied and sent.
  void compute() {
    const TracedOp& t = *op_;
    const int r = t.rank;
    struct Source {
      Target at;
      int link;
    };
    std::vector<Source> sources;
    for (size_t i = 0; i < t.in.size(); ++i)
      for (const Target& x : t.in[i]) sources.push_back({x, t.inLink[i]});
    if (!t.sums) sources = {sources.back()};
    std::optional<Loc> acc;
    for (const auto& entry : t.out)
      for (const Target& d : entry)
        if (!acc && d.rank == r) acc = loc(d);
    bool have = false;
    if (!acc && sources.size() == 1 && sources[0].at.rank == r) {
      acc = loc(sources[0].at);
      have = true;
      sources.clear();
    }
    if (!acc) acc = temp(r, t.in[0][0].len);
    // A source that is the accumulator already holds its part.
    auto self = std::find_if(sources.begin(), sources.end(),
                             [&](const Source& s) { return s.at.rank == r && loc(s.at) == *acc; });
    if (self != sources.end()) {
      sources.erase(self);
      have = true;
    }
    for (const Source& s : sources) {
      if (s.at.rank != r) {
        transfer(s.at.rank, loc(s.at), r, *acc, s.link, have);
      } else {
        const Loc l = loc(s.at);
        if (l.overlaps(*acc)) return refuse("a source overlaps its destination without being it");
        local(have ? ir::StepType::kReduce : ir::StepType::kCopy, l, *acc);
      }
      have = true;
    }
    for (size_t i = 0; i < t.out.size(); ++i)
      for (const Target& d : t.out[i]) {
        if (d.rank != r) {
          transfer(r, *acc, d.rank, loc(d), t.outLink[i], false);
          continue;
        }
        const Loc l = loc(d);
        if (l == *acc) continue;
        if (l.overlaps(*acc)) return refuse("two destinations overlap");
        local(ir::StepType::kCopy, *acc, l);
      }
  }

  void local(ir::StepType type, const Loc& src, const Loc& dst) {
    const int r = op_->rank;
    const int home = home_[{r, op_->tb}];
    std::vector<std::pair<Loc, bool>> touched{{src, false}, {dst, true}};
    if (type == ir::StepType::kReduce) touched.insert(touched.begin() + 1, {dst, false});
    emit(r, home, step(type, src, dst), touched);
  }
  // `from` sends `src`; `to` receives it into `dst` (reduce: dst += it).
  // The receive waits (receiveLater) until the round of the run ends or
  // its rank touches what it writes, so that a rank's own sends of a round
  // come before what it receives in it, as when they run.
  void transfer(int from, const Loc& src, int to, const Loc& dst, int link, bool reduce) {
    emit(from, connTb(from, to, link, true), step(ir::StepType::kSend, src, src), {{src, false}});
    const int tb = connTb(to, from, link, false);
    if (reduce)
      receiveLater(to, tb, step(ir::StepType::kRecvReduceCopy, dst, dst),
                   {{dst, false}, {dst, true}});
    else
      receiveLater(to, tb, step(ir::StepType::kRecv, dst, dst), {{dst, true}});
  }
  struct Pending {
    int tb = 0;
    ir::Step step;
    std::vector<std::pair<Loc, bool>> touched;
  };
  void receiveLater(int r, int tb, const ir::Step& s, std::vector<std::pair<Loc, bool>> touched) {
    pending_.resize(static_cast<size_t>(n_));
    pending_[static_cast<size_t>(r)].push_back({tb, s, std::move(touched)});
  }
  // Emits rank r's waiting receives, in the order their sends came.
  void flush(int r) {
    if (pending_.empty()) return;
    std::vector<Pending> list = std::move(pending_[static_cast<size_t>(r)]);
    pending_[static_cast<size_t>(r)].clear();
    for (const Pending& p : list) emitNow(r, p.tb, p.step, p.touched);
  }
  void endRound() override {
    for (int r = 0; r < n_; ++r) flush(r);
  }
  ir::Step step(ir::StepType type, const Loc& src, const Loc& dst) {
    if (src.off + src.len > INT_MAX || dst.off + dst.len > INT_MAX)
      refuse("an offset past what an algorithm can index");
    ir::Step s;
    s.type = type;
    s.srcBuf = src.buf;
    s.srcOff = static_cast<int>(src.off);
    s.dstBuf = dst.buf;
    s.dstOff = static_cast<int>(dst.off);
    s.count = static_cast<int>(src.len);
    return s;
  }

  // The steps as emitted, before they become IR threadblocks' lists: what
  // each depends on (earlier steps, by emission index), so the receives
  // can be rewritten before dependencies are numbered.
  struct Proto {
    int rank = 0, tb = 0;
    ir::Step step;
    std::set<int> deps;  // every hazard, own threadblock included
    bool removed = false;
    int dstWriter = -1;  // what last wrote all of its destination before it, if one step did
  };
  // Who last wrote a unit, and who read it since.
  struct Unit {
    int write = -1;
    std::vector<int> reads;
  };
  std::vector<Unit>& units(int r, ir::Buffer b, size_t end) {
    auto& v = units_[static_cast<size_t>(r)][static_cast<size_t>(b)];
    if (v.size() < end) v.resize(end);
    return v;
  }

  // `s` on threadblock `tb` of rank `r`, after every step that wrote what
  // it reads and, when it writes, every step that read or wrote that since.
  void emit(int r, int tb, const ir::Step& s, const std::vector<std::pair<Loc, bool>>& touched) {
    if (!pending_.empty()) {
      bool meets = false;
      for (const Pending& p : pending_[static_cast<size_t>(r)])
        for (const auto& a : p.touched)
          for (const auto& b : touched) meets = meets || a.first.overlaps(b.first);
      if (meets) flush(r);
    }
    emitNow(r, tb, s, touched);
  }
  void emitNow(int r, int tb, const ir::Step& s, const std::vector<std::pair<Loc, bool>>& touched) {
    if (!why_.empty()) return;
    const int me = static_cast<int>(protos_.size());
    Proto p{r, tb, s, {}};
    std::set<int> from;  // the steps whose data it reads
    for (const auto& [l, writes] : touched) {
      auto& v = units(r, l.buf, l.off + l.len);
      for (size_t u = l.off; u < l.off + l.len; ++u) {
        if (v[u].write >= 0) {
          p.deps.insert(v[u].write);
          if (!writes) from.insert(v[u].write);
        }
        if (writes) p.deps.insert(v[u].reads.begin(), v[u].reads.end());
      }
    }
    for (int w : from) readers_[w].insert(me);
    for (const auto& [l, writes] : touched)
      if (writes) {
        auto& v = units(r, l.buf, l.off + l.len);
        p.dstWriter = v[l.off].write;
        for (size_t u = l.off; u < l.off + l.len; ++u)
          if (v[u].write != p.dstWriter) p.dstWriter = -1;
      }
    protos_.push_back(std::move(p));
    for (const auto& [l, writes] : touched) {
      auto& v = units(r, l.buf, l.off + l.len);
      for (size_t u = l.off; u < l.off + l.len; ++u) {
        Unit& x = v[u];
        if (writes) {
          x.write = me;
          x.reads.clear();
        } else if (std::find(x.reads.begin(), x.reads.end(), me) == x.reads.end()) {
          x.reads.push_back(me);
        }
      }
    }
  }

  static Loc srcOf(const ir::Step& s) {
    return {s.srcBuf, static_cast<size_t>(s.srcOff), static_cast<size_t>(s.count)};
  }
  static Loc dstOf(const ir::Step& s) {
    return {s.dstBuf, static_cast<size_t>(s.dstOff), static_cast<size_t>(s.count)};
  }

  Proto& at(int i) { return protos_[static_cast<size_t>(i)]; }
  // `gone` leaves; what depended on it depends on `into`.
  void absorb(int into, int gone) {
    at(gone).removed = true;
    for (int q : dependents_[static_cast<size_t>(gone)])
      if (at(q).deps.erase(gone) > 0 && q != into) {
        at(q).deps.insert(into);
        dependents_[static_cast<size_t>(into)].push_back(q);
      }
  }
  // `into` also waits for `deps`.
  void adopt(int into, const std::set<int>& deps) {
    for (int d : deps)
      if (d != into && at(into).deps.insert(d).second)
        dependents_[static_cast<size_t>(d)].push_back(into);
  }

  // A plan's slot: a receive into scratch whose data one step copies or
  // reduces into its destination (and sends may forward). The receive
  // goes straight to the destination (r, or rrc) and takes that step's
  // hazards and its place in what depended on it:
  //  - a copy: r into the destination; forwarding sends read it there
  //    (only when nothing writes it afterwards);
  //  - a reduce: rrc into the destination; when the destination was just
  //    filled by a copy that only this reduce reads, that copy goes too
  //    (rrc reads its source);
  //  - a reduce into the slot itself (slot += A): rrc of A into the slot.
  // Only where every hazard it takes was emitted before the receive, so
  // nothing it waits for comes after it: the program stays free of
  // deadlocks whatever the slots.
  void receiveInPlace() {
    dependents_.assign(protos_.size(), {});
    for (size_t q = 0; q < protos_.size(); ++q)
      for (int d : protos_[q].deps)
        dependents_[static_cast<size_t>(d)].push_back(static_cast<int>(q));
    auto onlyReader = [&](int of, int reader) {
      auto it = readers_.find(of);
      return it != readers_.end() && it->second == std::set<int>{reader};
    };
    for (size_t i = 0; i < protos_.size(); ++i) {
      const int r = static_cast<int>(i);
      Proto& recv = at(r);
      auto it = readers_.find(r);
      if (recv.removed || recv.step.type != ir::StepType::kRecv ||
          recv.step.dstBuf != ir::Buffer::kScratch || it == readers_.end())
        continue;
      const Loc slot = dstOf(recv.step);
      int use = -1;
      std::vector<int> sends;
      bool other = false;
      for (int q : it->second) {
        const ir::Step& s = at(q).step;
        const bool mover = s.type == ir::StepType::kCopy || s.type == ir::StepType::kReduce;
        // (A reduce into the slot itself, slot += A, is a receive that adds A.)
        const bool into =
            s.type == ir::StepType::kReduce && dstOf(s) == slot && !srcOf(s).overlaps(slot);
        if (!at(q).removed && mover && use < 0 &&
            ((srcOf(s) == slot && !dstOf(s).overlaps(slot)) || into))
          use = q;
        else if (!at(q).removed && s.type == ir::StepType::kSend && srcOf(s) == slot)
          sends.push_back(q);
        else
          other = true;
      }
      if (other || use < 0) continue;
      const Proto& u = at(use);
      const Loc dst = dstOf(u.step);
      std::set<int> deps = u.deps;
      deps.erase(r);
      int init = -1;
      ir::Step next;
      if (dst == slot) {
        if (!sends.empty()) continue;
        next = step(ir::StepType::kRecvReduceCopy, srcOf(u.step), dst);
      } else if (u.step.type == ir::StepType::kCopy) {
        auto& v = units(u.rank, dst.buf, dst.off + dst.len);
        bool last = true;
        for (size_t k = dst.off; k < dst.off + dst.len; ++k) last = last && v[k].write == use;
        if (!sends.empty() && !last) continue;
        next = step(ir::StepType::kRecv, dst, dst);
      } else {
        if (!sends.empty()) continue;
        next = step(ir::StepType::kRecvReduceCopy, dst, dst);
        const int w = u.dstWriter;
        if (!deps.empty() && *deps.rbegin() > r && w > r &&
            at(w).step.type == ir::StepType::kCopy && dstOf(at(w).step) == dst &&
            onlyReader(w, use)) {
          init = w;
          deps.erase(w);
          for (int d : at(w).deps)
            if (d != r) deps.insert(d);
          next = step(ir::StepType::kRecvReduceCopy, srcOf(at(w).step), dst);
        }
      }
      if (!deps.empty() && *deps.rbegin() > r) continue;
      recv.step = next;
      adopt(r, deps);
      for (int q : sends) {
        at(q).step.srcBuf = at(q).step.dstBuf = dst.buf;
        at(q).step.srcOff = at(q).step.dstOff = static_cast<int>(dst.off);
      }
      if (init >= 0) absorb(r, init);
      absorb(r, use);
    }
  }

  // A rank that receives from p and forwards what it received to q on the
  // same channel (a ring) does both on one threadblock, as MSCCL rings do:
  // the receiving and sending threadblocks with the most such forwards are
  // merged (steps in emission order, which keeps every wait backwards),
  // and a send joins the receive it forwards (rcs, rrcs).
  void forwardInPlace() {
    std::map<std::tuple<int, int, int>, int> pairs;  // (rank, receiving tb, sending tb) -> forwards
    for (const Proto& p : protos_) {
      if (p.removed || p.step.type != ir::StepType::kSend) continue;
      for (int d : p.deps) {
        const Proto& w = at(d);
        if (!w.removed && ir::receives(w.step.type) && ir::writesDst(w.step.type) &&
            dstOf(w.step) == srcOf(p.step))
          ++pairs[{p.rank, w.tb, p.tb}];
      }
    }
    std::vector<std::pair<int, std::tuple<int, int, int>>> order;
    for (const auto& [key, n] : pairs) order.push_back({-n, key});
    std::sort(order.begin(), order.end());
    std::set<std::pair<int, int>> merged;
    std::map<std::pair<int, int>, int> into;  // (rank, sending tb) -> receiving tb
    for (const auto& [n, key] : order) {
      const auto [r, a, b] = key;
      auto& tbs = a_.ranks[static_cast<size_t>(r)].tbs;
      ir::Threadblock& recvTb = tbs[static_cast<size_t>(a)];
      ir::Threadblock& sendTb = tbs[static_cast<size_t>(b)];
      if (merged.count({r, a}) || merged.count({r, b}) || recvTb.channel != sendTb.channel ||
          recvTb.sendPeer >= 0 || sendTb.recvPeer >= 0)
        continue;
      merged.insert({r, a});
      merged.insert({r, b});
      recvTb.sendPeer = sendTb.sendPeer;
      sendTb.sendPeer = -1;
      into[{r, b}] = a;
    }
    if (into.empty()) return;
    for (Proto& p : protos_) {
      auto it = into.find({p.rank, p.tb});
      if (it != into.end()) p.tb = it->second;
    }
    // A send joins the receive whose data it forwards when no other send
    // of its threadblock lies between them (each connection's order stays)
    // and all else it waits for was emitted before that receive.
    std::map<std::pair<int, int>, int> lastSend;  // (rank, tb) -> its latest send so far
    for (size_t i = 0; i < protos_.size(); ++i) {
      const int s = static_cast<int>(i);
      if (at(s).removed || !ir::sends(at(s).step.type)) continue;
      int& before = lastSend.try_emplace({at(s).rank, at(s).tb}, -1).first->second;
      int w = -1;
      for (int d : at(s).deps)
        if (at(d).tb == at(s).tb && dstOf(at(d).step) == srcOf(at(s).step) &&
            (at(d).step.type == ir::StepType::kRecv ||
             at(d).step.type == ir::StepType::kRecvReduceCopy))
          w = std::max(w, d);
      std::set<int> deps = at(s).deps;
      deps.erase(w);
      if (at(s).step.type != ir::StepType::kSend || w < 0 || w < before ||
          (!deps.empty() && *deps.rbegin() > w)) {
        before = s;
        continue;
      }
      at(w).step.type = at(w).step.type == ir::StepType::kRecv ? ir::StepType::kRecvCopySend
                                                               : ir::StepType::kRecvReduceCopySend;
      adopt(w, deps);
      absorb(w, s);
      before = w;
      // A sum kept only to be sent (a slot in scratch nobody reads again)
      // is not stored: rrs.
      const Loc kept = dstOf(at(w).step);
      bool read = kept.buf != ir::Buffer::kScratch;
      for (int q : dependents_[static_cast<size_t>(w)]) {
        const ir::Step& y = at(q).step;
        read = read || (!at(q).removed && at(q).deps.count(w) &&
                        ((ir::readsSrc(y.type) && srcOf(y).overlaps(kept)) ||
                         (ir::readsDst(y.type) && dstOf(y).overlaps(kept))));
      }
      if (!read && at(w).step.type == ir::StepType::kRecvReduceCopySend)
        at(w).step.type = ir::StepType::kRecvReduceSend;
    }
  }

  // The threadblocks' step lists: each step's first dependency on another
  // threadblock on the step, the others on nops before it.
  void number() {
    // Every dependency points to an earlier step (emission order, kept by
    // the rewrites), so one pass numbers and links them.
    std::vector<int> pos(protos_.size(), -1);
    for (size_t i = 0; i < protos_.size(); ++i) {
      const Proto& p = protos_[i];
      if (p.removed) continue;
      auto& k = a_.ranks[static_cast<size_t>(p.rank)];
      auto& steps = k.tbs[static_cast<size_t>(p.tb)].steps;
      auto depend = [&](ir::Step& on, int d) {
        const Proto& q = protos_[static_cast<size_t>(d)];
        on.depTb = q.tb;
        on.depStep = pos[static_cast<size_t>(d)];
        k.tbs[static_cast<size_t>(q.tb)].steps[static_cast<size_t>(on.depStep)].hasDep = true;
      };
      // The latest step of each other threadblock that it waits for.
      std::map<int, int> latest;
      for (int d : p.deps) {
        const Proto& q = protos_[static_cast<size_t>(d)];
        CHORUS_CHECK(d < static_cast<int>(i) && pos[static_cast<size_t>(d)] >= 0,
                     "a lowered step depends on one emitted after it");
        if (q.tb != p.tb) latest[q.tb] = std::max(latest[q.tb], d);
      }
      ir::Step st = p.step;
      for (auto it = latest.begin(); it != latest.end(); ++it) {
        if (std::next(it) == latest.end()) {
          depend(st, it->second);
          break;
        }
        ir::Step nop;
        nop.type = ir::StepType::kNop;
        depend(nop, it->second);
        steps.push_back(nop);
      }
      pos[i] = static_cast<int>(steps.size());
      steps.push_back(st);
    }
  }

  const Plan& p_;
  int n_ = 0;
  size_t U_ = 1;
  ir::Algorithm a_;
  std::vector<std::array<std::vector<Unit>, ir::kNumBuffers>> units_;
  std::vector<Proto> protos_;
  std::map<int, std::set<int>> readers_;
  std::vector<std::vector<int>> dependents_;
  std::vector<std::vector<Pending>>
      pending_;  // receives not yet emitted, per rank  // a step -> the steps that depend on it  //
                 // a step -> the steps that read what it wrote
  std::vector<size_t> temp_;
  std::map<std::pair<int, int>, int> home_;              // (rank, plan tb id) -> IR tb
  std::map<std::tuple<int, int, int, bool>, int> conn_;  // (rank, peer, link, sends)
  int links_ = 1;
  const TracedOp* op_ = nullptr;
  const TracedOp* failed_ = nullptr;
  std::string why_;
};

ir::ReadResult readPlanAsAlgorithm(std::string_view text, const std::string& file) {
  ir::ReadResult out;
  ir::mscclpp::PlanReadResult read = ir::mscclpp::readPlan(text, file);
  out.diagnostics.append(read.diagnostics);
  if (!read.plan) return out;
  PlanLowering low = lowerPlan(*read.plan, file);
  out.diagnostics.append(low.diagnostics);
  out.algorithm = std::move(low.algorithm);
  if (out.algorithm) out.algorithm->sourceFile = file;
  return out;
}

}  // namespace plan_lower

PlanLowering lowerPlan(const ir::mscclpp::Plan& plan, const std::string& file) {
  PlanLowering out;
  PlanOptions options;
  options.leastUnitsPerChunk = 1;
  plan_lower::Lowerer low(plan);
  PlanReport proof = plan_check::tracePlan(plan, file, options, &low);
  out.diagnostics.append(proof.diagnostics);
  out.unitsPerChunk = proof.unitsPerChunk;
  if (!proof.correct()) return out;
  plan_lower::Lowerer unmerged = low;  // (finish() rewrites its steps)
  std::optional<ir::Algorithm> algo = low.finish(/*forward=*/true);
  Report again;
  if (algo) again = verifyAlgorithm(*algo);
  // A merged ring threadblock that sends a slot's worth before it first
  // receives can wait, with its peers, for slots none of them frees (E205):
  // then each connection keeps a threadblock of its own, whose receives
  // never wait for a slot, and the form holds with any number of them.
  if (algo && again.diagnostics.contains(DiagCode::kSlotDeadlock)) {
    algo = unmerged.finish(/*forward=*/false);
    if (algo) again = verifyAlgorithm(*algo);
  }
  auto refuse = [&](const std::string& why, int rank, int tb, int step) {
    Location l;
    l.file = file;
    l.rank = rank;
    l.tb = tb;
    l.step = step;
    out.diagnostics.add(DiagCode::kPlanNotRunnable, l, why);
  };
  if (!algo) {
    const plan_check::TracedOp* op = low.failedOp();
    refuse("cannot be run as two-sided steps: " + low.why(), op ? op->rank : -1, op ? op->tb : -1,
           op ? op->index : -1);
    return out;
  }
  if (!again.correct()) {
    std::string first;
    for (const Diagnostic& d : again.diagnostics.items())
      if (d.severity == Severity::kError) {
        first = d.format();
        break;
      }
    refuse("its two-sided form does not prove, which is a bug of Chorus's (please report it): " +
               first,
           -1, -1, -1);
    return out;
  }
  out.algorithm = std::move(algo);
  return out;
}

const ir::PlanFiles& planFiles() {
  static const ir::PlanFiles files{&plan_lower::readPlanAsAlgorithm};
  return files;
}

}  // namespace chorus::verify
