#include "verify/semantics.h"

#include <algorithm>
#include <memory>
#include <set>

#include "ir/validate.h"

namespace chorus::verify {
namespace {

using ir::Buffer;

constexpr int kMaxReportsPerKind = 16;

// A symbolic chunk value: the multiset of input contributions (sorted ids
// rank * inputChunks + chunk), or garbage (uninitialized data mixed in).
// Values are immutable and shared: copies, sends and receives share one
// term list, so an allgather phase does not multiply memory by the rank
// count; only a reduction builds a new list.
class Value {
 public:
  Value() = default;  // uninitialized data
  static Value input(uint32_t id) {
    return Value(std::make_shared<const std::vector<uint32_t>>(1, id), false);
  }
  static Value sum(const Value& a, const Value& b) {
    auto terms = std::make_shared<std::vector<uint32_t>>(a.terms().size() + b.terms().size());
    std::merge(a.terms().begin(), a.terms().end(), b.terms().begin(), b.terms().end(),
               terms->begin());
    return Value(std::move(terms), a.garbage_ || b.garbage_);
  }
  const std::vector<uint32_t>& terms() const {
    static const std::vector<uint32_t> kNone;
    return terms_ ? *terms_ : kNone;
  }
  bool garbage() const { return garbage_; }

 private:
  Value(std::shared_ptr<const std::vector<uint32_t>> t, bool garbage)
      : terms_(std::move(t)), garbage_(garbage) {}
  std::shared_ptr<const std::vector<uint32_t>> terms_;
  bool garbage_ = true;
};

// Replacement local operand for a reducing receive (remote-operand probe).
using OperandOverride = std::map<NodeId, std::pair<Buffer, int>>;

class SymbolicRun {
 public:
  SymbolicRun(const StepGraph& g, const CallModel& m, const OperandOverride& ov)
      : g_(g), m_(m), ov_(ov) {
    const auto& a = g.algo();
    state_.resize(a.ngpus);
    lastWriter_.resize(a.ngpus);
    for (int r = 0; r < a.ngpus; ++r) {
      state_[r].assign(m.slotCount(r), Value{});
      lastWriter_[r].assign(m.slotCount(r), kNoNode);
      for (int k = 0; k < m.inputChunks(); ++k) state_[r][m.inputSlot(r, k)] = inputValue(r, k);
    }
    messages_.resize(g.size());
  }

  Value inputValue(int r, int k) const {
    return Value::input(static_cast<uint32_t>(r * m_.inputChunks() + k));
  }

  void run() {
    for (NodeId n : g_.topoOrder()) exec(n);
  }

  const Value& at(int rank, int slot) const { return state_[rank][slot]; }
  NodeId lastWriter(int rank, int slot) const { return lastWriter_[rank][slot]; }
  const std::vector<NodeId>& outOfBuffer() const { return outOfBuffer_; }

 private:
  int slotOf(NodeId n, Buffer b, int idx) {
    int s = m_.slot(g_.rankOf(n), b, idx);
    if (s < 0 && (outOfBuffer_.empty() || outOfBuffer_.back() != n)) outOfBuffer_.push_back(n);
    return s;
  }
  Value read(NodeId n, Buffer b, int idx) {
    int s = slotOf(n, b, idx);
    return s < 0 ? Value{} : state_[g_.rankOf(n)][s];
  }
  void write(NodeId n, Buffer b, int idx, Value v) {
    int s = slotOf(n, b, idx);
    if (s < 0) return;
    state_[g_.rankOf(n)][s] = std::move(v);
    lastWriter_[g_.rankOf(n)][s] = n;
  }

  void exec(NodeId n) {
    const ir::Step& st = g_.step(n);
    if (st.type == ir::StepType::kNop) return;
    Buffer srcBuf = st.srcBuf;
    int srcOff = st.srcOff;
    if (auto it = ov_.find(n); it != ov_.end()) std::tie(srcBuf, srcOff) = it->second;
    std::vector<Value>* in = nullptr;
    if (ir::receives(st.type)) in = &messages_[g_.matchedSend(n)];
    std::vector<Value> out;
    for (int i = 0; i < st.count; ++i) {
      Value v;
      switch (st.type) {
        case ir::StepType::kSend:
          v = read(n, srcBuf, srcOff + i);
          break;
        case ir::StepType::kRecv:
        case ir::StepType::kRecvCopySend:
          v = (*in)[i];
          break;
        case ir::StepType::kRecvReduceSend:
        case ir::StepType::kRecvReduceCopy:
        case ir::StepType::kRecvReduceCopySend:
          v = Value::sum((*in)[i], read(n, srcBuf, srcOff + i));
          break;
        case ir::StepType::kCopy:
          v = read(n, srcBuf, srcOff + i);
          break;
        case ir::StepType::kReduce:
          v = Value::sum(read(n, st.dstBuf, st.dstOff + i), read(n, srcBuf, srcOff + i));
          break;
        case ir::StepType::kNop:
          break;
      }
      if (ir::writesDst(st.type)) write(n, st.dstBuf, st.dstOff + i, v);
      if (ir::sends(st.type)) out.push_back(std::move(v));
    }
    if (ir::sends(st.type)) messages_[n] = std::move(out);
    if (in) in->clear();  // each message is received exactly once
  }

  const StepGraph& g_;
  const CallModel& m_;
  const OperandOverride& ov_;
  std::vector<std::vector<Value>> state_;
  std::vector<std::vector<NodeId>> lastWriter_;
  std::vector<std::vector<Value>> messages_;
  std::vector<NodeId> outOfBuffer_;
};

// Pretty-printing of contribution multisets: "in3[5]".
std::string term(uint32_t id, int inputChunks) {
  return "in" + std::to_string(id / inputChunks) + "[" + std::to_string(id % inputChunks) + "]";
}

std::string listTerms(const std::vector<uint32_t>& ids, int inputChunks, size_t limit = 6) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < limit; ++i) {
    if (i) s += " + ";
    s += term(ids[i], inputChunks);
  }
  if (ids.size() > limit) s += " + ... (" + std::to_string(ids.size()) + " terms)";
  return s.empty() ? "nothing" : s;
}

struct Finding {
  DiagCode code;
  Location loc;
  std::string msg;
};

// Compares final state with the post-condition for `root`; returns findings.
std::vector<Finding> compare(const StepGraph& g, const CallModel& m, const SymbolicRun& run,
                             int root, const std::string& form) {
  std::vector<Finding> out;
  const auto& a = g.algo();
  const int inChunks = std::max(1, m.inputChunks());
  for (int r = 0; r < a.ngpus; ++r) {
    for (int k = 0; k < m.outputChunks(); ++k) {
      auto want = m.expected(r, k, root);
      if (!want) continue;
      std::vector<uint32_t> w;
      for (auto [q, c] : *want) w.push_back(static_cast<uint32_t>(q * m.inputChunks() + c));
      std::sort(w.begin(), w.end());
      int slot = m.outputSlot(r, k);
      const Value& got = run.at(r, slot);
      const std::vector<uint32_t>& terms = got.terms();
      if (!got.garbage() && terms == w) continue;
      std::vector<uint32_t> extra, missing, twice;
      std::set_difference(terms.begin(), terms.end(), w.begin(), w.end(),
                          std::back_inserter(extra));
      std::set_difference(w.begin(), w.end(), terms.begin(), terms.end(),
                          std::back_inserter(missing));
      for (size_t i = 1; i < terms.size(); ++i)
        if (terms[i] == terms[i - 1] && (twice.empty() || twice.back() != terms[i]))
          twice.push_back(terms[i]);
      DiagCode code = DiagCode::kWrongResult;
      std::vector<uint32_t> uniqueExtra;
      std::set_difference(extra.begin(), extra.end(), twice.begin(), twice.end(),
                          std::back_inserter(uniqueExtra));
      bool foreign = got.garbage() || std::any_of(extra.begin(), extra.end(), [&](uint32_t t) {
                       return !std::binary_search(w.begin(), w.end(), t);
                     });
      if (!foreign && !twice.empty())
        code = DiagCode::kDuplicateContribution;
      else if (!foreign && !missing.empty())
        code = DiagCode::kMissingContribution;
      std::string what = m.outputName(r, k);
      std::string holds =
          got.garbage() ? (terms.empty() ? "uninitialized data"
                                         : "uninitialized data + " + listTerms(terms, inChunks))
                        : listTerms(terms, inChunks);
      std::string msg = form + ": output chunk " + what + " holds " + holds + "; it should hold " +
                        listTerms(w, inChunks);
      std::vector<uint32_t> foreignTerms;
      for (uint32_t t : uniqueExtra)
        if (!std::binary_search(w.begin(), w.end(), t)) foreignTerms.push_back(t);
      if (!foreignTerms.empty()) msg += "; unexpected " + listTerms(foreignTerms, inChunks);
      if (!missing.empty()) msg += "; missing " + listTerms(missing, inChunks);
      if (!twice.empty()) msg += "; counted more than once: " + listTerms(twice, inChunks);
      NodeId writer = run.lastWriter(r, slot);
      Location loc = writer == kNoNode ? ir::siteLocation(a, r)
                                       : ir::siteLocation(a, r, g.tbOf(writer), g.stepOf(writer));
      msg += writer == kNoNode ? " (no step writes it)" : " (last written here)";
      out.push_back(Finding{code, loc, msg});
    }
  }
  if (!m.inplace()) {
    for (int r = 0; r < a.ngpus; ++r) {
      for (int k = 0; k < m.inputChunks(); ++k) {
        int slot = m.inputSlot(r, k);
        const Value& got = run.at(r, slot);
        if (!got.garbage() && got.terms().size() == 1 &&
            got.terms()[0] == uint32_t(r * m.inputChunks() + k))
          continue;
        NodeId writer = run.lastWriter(r, slot);
        out.push_back(
            Finding{DiagCode::kInputModified,
                    writer == kNoNode ? ir::siteLocation(a, r)
                                      : ir::siteLocation(a, r, g.tbOf(writer), g.stepOf(writer)),
                    form + ": input chunk i[" + std::to_string(k) +
                        "] is overwritten; an out-of-place call must leave its input intact"});
      }
    }
  }
  return out;
}

// Where a chunk sent to `recv` lives on its sender, for the remote-operand probe.
std::optional<std::pair<Buffer, int>> remoteLocation(const StepGraph& g, NodeId recv) {
  NodeId s = g.matchedSend(recv);
  if (s == kNoNode) return std::nullopt;
  const ir::Step& st = g.step(s);
  if (st.type == ir::StepType::kRecvCopySend || st.type == ir::StepType::kRecvReduceCopySend)
    return std::pair{st.dstBuf, st.dstOff};
  return std::pair{st.srcBuf, st.srcOff};
}

}  // namespace

SemanticsResult checkSemantics(const StepGraph& g, const CallModel& m, DiagnosticList& diags) {
  const auto& a = g.algo();
  std::string form = m.inplace() ? "in-place" : "out-of-place";
  OperandOverride none;
  SymbolicRun run(g, m, none);
  run.run();
  SemanticsResult result;

  for (NodeId n : run.outOfBuffer()) {
    diags.add(DiagCode::kOutOfBuffer, ir::siteLocation(a, g.rankOf(n), g.tbOf(n), g.stepOf(n)),
              form + ": touches a chunk past the buffer the call provides (input " +
                  std::to_string(m.inputChunks()) + " chunks, output " +
                  std::to_string(m.outputChunks()) + " chunks)");
  }

  // Rooted collectives: the file does not name its root; find it.
  std::vector<Finding> best;
  int bestRoot = -1;
  int roots = m.rooted() ? a.ngpus : 1;
  for (int root = 0; root < roots; ++root) {
    auto f =
        compare(g, m, run, root, m.rooted() ? form + " (root " + std::to_string(root) + ")" : form);
    if (bestRoot < 0 || f.size() < best.size()) {
      best = std::move(f);
      bestRoot = root;
    }
    if (best.empty()) break;
  }
  result.root = m.rooted() ? bestRoot : -1;
  result.correct = best.empty() && run.outOfBuffer().empty();
  if (best.empty()) return result;

  size_t shown = std::min<size_t>(best.size(), kMaxReportsPerKind);
  for (size_t i = 0; i < shown; ++i) diags.add(best[i].code, best[i].loc, best[i].msg);
  if (best.size() > shown) {
    diags.add(best[shown].code, ir::siteLocation(a, -1),
              form + ": " + std::to_string(best.size() - shown) + " more wrong chunk(s) not shown");
  }

  // msccl-tools writes the remote chunk as the src of rrs/rrc/rrcs. If
  // replacing such operands by the local dst makes the algorithm correct,
  // that mistake is the cause: say so at each step.
  OperandOverride probe;
  for (NodeId n = 0; n < static_cast<NodeId>(g.size()); ++n) {
    const ir::Step& st = g.step(n);
    if (!ir::reduces(st.type) || !ir::receives(st.type)) continue;
    if (st.dstOff < 0 || (st.srcBuf == st.dstBuf && st.srcOff == st.dstOff)) continue;
    auto remote = remoteLocation(g, n);
    if (remote && *remote == std::pair{st.srcBuf, st.srcOff}) probe[n] = {st.dstBuf, st.dstOff};
  }
  if (!probe.empty()) {
    SymbolicRun fixed(g, m, probe);
    fixed.run();
    if (fixed.outOfBuffer().empty() && compare(g, m, fixed, bestRoot, form).empty()) {
      for (const auto& [n, op] : probe) {
        const ir::Step& st = g.step(n);
        diags.add(DiagCode::kRemoteOperand,
                  ir::siteLocation(a, g.rankOf(n), g.tbOf(n), g.stepOf(n)),
                  form + ": " + std::string(ir::stepTypeName(st.type)) + " reduces with src " +
                      bufferLetter(st.srcBuf) + "[" + std::to_string(st.srcOff) +
                      "], the sender's chunk (the msccl-tools remote-operand mistake); the "
                      "local operand is " +
                      bufferLetter(op.first) + "[" + std::to_string(op.second) +
                      "], and with it the algorithm is correct");
      }
    }
  }
  return result;
}

bool checkRaces(StepGraph& g, const CallModel& m, DiagnosticList& diags) {
  const auto& a = g.algo();
  std::string form = m.inplace() ? "in-place" : "out-of-place";
  struct Access {
    NodeId node;
    bool write;
  };
  // Candidate pairs: same rank and chunk slot, different threadblocks, at
  // least one write. Only their threadblocks need happens-before clocks.
  std::vector<std::pair<Access, Access>> candidates;
  for (int r = 0; r < a.ngpus; ++r) {
    std::vector<std::vector<Access>> bySlot(m.slotCount(r));
    for (const ir::Threadblock& tb : a.ranks[r].tbs) {
      for (int si = 0; si < static_cast<int>(tb.steps.size()); ++si) {
        const ir::Step& st = tb.steps[si];
        NodeId n = g.node(r, tb.id, si);
        auto touch = [&](Buffer b, int off, bool write) {
          for (int i = 0; i < st.count; ++i) {
            int s = m.slot(r, b, off + i);
            if (s >= 0) bySlot[s].push_back(Access{n, write});
          }
        };
        if (ir::readsSrc(st.type)) touch(st.srcBuf, st.srcOff, false);
        if (ir::readsDst(st.type)) touch(st.dstBuf, st.dstOff, false);
        if (ir::writesDst(st.type)) touch(st.dstBuf, st.dstOff, true);
      }
    }
    for (const auto& acc : bySlot) {
      for (size_t i = 0; i < acc.size(); ++i)
        for (size_t j = i + 1; j < acc.size(); ++j)
          if ((acc[i].write || acc[j].write) && g.tbOf(acc[i].node) != g.tbOf(acc[j].node))
            candidates.emplace_back(acc[i], acc[j]);
    }
  }
  if (candidates.empty()) return true;
  std::vector<char> isTracked(g.totalTbs(), 0);
  for (const auto& [x, y] : candidates)
    isTracked[g.globalTbOf(x.node)] = isTracked[g.globalTbOf(y.node)] = 1;
  std::vector<int> tracked;
  for (size_t t = 0; t < isTracked.size(); ++t)
    if (isTracked[t]) tracked.push_back(static_cast<int>(t));
  if (!g.computeClocks(tracked)) return false;

  std::set<std::pair<NodeId, NodeId>> reported;
  size_t suppressed = 0;
  for (const auto& [x, y] : candidates) {
    if (g.happensBefore(x.node, y.node) || g.happensBefore(y.node, x.node)) continue;
    auto key = std::minmax(x.node, y.node);
    if (!reported.insert(key).second) continue;
    if (reported.size() > kMaxReportsPerKind) {
      ++suppressed;
      continue;
    }
    NodeId later = key.second, earlier = key.first;
    const Access& al = x.node == later ? x : y;
    const Access& ae = x.node == later ? y : x;
    auto verb = [](const Access& z) { return z.write ? "writes" : "reads"; };
    diags.add(DiagCode::kRace, ir::siteLocation(a, g.rankOf(later), g.tbOf(later), g.stepOf(later)),
              form + ": " + g.describe(later) + " " + verb(al) + " a chunk that " +
                  g.describe(earlier) + " " + verb(ae) +
                  ", and no dependency or message orders the two");
  }
  if (suppressed > 0) {
    diags.add(DiagCode::kRace, ir::siteLocation(a, -1),
              form + ": " + std::to_string(suppressed) + " more race(s) not shown");
  }
  return true;
}

}  // namespace chorus::verify
