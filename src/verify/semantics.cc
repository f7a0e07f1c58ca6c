#include "verify/semantics.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>

#include "core/check.h"
#include "ir/validate.h"

namespace chorus::verify {
namespace {

using ir::Buffer;

constexpr int kMaxReportsPerKind = 16;
// The race check's budget: steps x tracked threadblocks, summed over ranks.
constexpr size_t kMaxClockCells = size_t{1} << 28;

// A symbolic chunk value: the multiset of input contributions, or garbage
// (uninitialized data mixed in). Contributions are ids numbered chunk-major
// (in_q[k] is k * ngpus + q), kept as sorted, disjoint runs of consecutive
// ids with a count each (adjacent runs of one count merged: the form is
// canonical, so equal multisets are equal run lists). A ring's partial sum,
// a reduction over a node's ranks, a whole allreduce result: one run each,
// so a step costs O(runs), not O(ranks). Values are immutable and shared:
// copies, sends and receives share one run list; only a reduction builds a
// new one. A value of one or two runs (an input chunk, a ring's partial sum,
// a whole allreduce result: most values) is held inline, with no
// allocation: run lists live on the heap only where a value has more (4096
// ranks: 16.7 M input values alone took 0.8 GB as shared lists).
struct Run {
  uint32_t lo = 0, hi = 0;  // ids [lo, hi)
  uint32_t count = 1;       // each this many times
  bool operator==(const Run& o) const { return lo == o.lo && hi == o.hi && count == o.count; }
};
using Runs = std::vector<Run>;

// Appends [lo, hi) x count to canonical `out` (lo >= the last run's hi).
void append(Runs& out, uint32_t lo, uint32_t hi, uint32_t count) {
  if (lo >= hi) return;
  if (!out.empty() && out.back().hi == lo && out.back().count == count)
    out.back().hi = hi;
  else
    out.push_back(Run{lo, hi, count});
}

// The multiset sum of two canonical run lists, into `out` (cleared).
void addInto(Runs& out, std::span<const Run> a, std::span<const Run> b) {
  out.clear();
  out.reserve(a.size() + b.size());
  constexpr uint32_t kEnd = UINT32_MAX;
  size_t i = 0, j = 0;
  uint32_t pos = 0;
  while (i < a.size() || j < b.size()) {
    const uint32_t alo = i < a.size() ? std::max(a[i].lo, pos) : kEnd;
    const uint32_t blo = j < b.size() ? std::max(b[j].lo, pos) : kEnd;
    if (alo < blo) {
      pos = std::min(a[i].hi, blo);
      append(out, alo, pos, a[i].count);
    } else if (blo < alo) {
      pos = std::min(b[j].hi, alo);
      append(out, blo, pos, b[j].count);
    } else {
      pos = std::min(a[i].hi, b[j].hi);
      // Saturating: a count that reaches the top stays there (no expected
      // result holds a contribution 2^32 - 1 times), so a wrap cannot make
      // a wrong multiset look right.
      const uint64_t sum = uint64_t{a[i].count} + b[j].count;
      append(out, alo, pos, static_cast<uint32_t>(std::min<uint64_t>(sum, UINT32_MAX)));
    }
    if (i < a.size() && pos >= a[i].hi) ++i;
    if (j < b.size() && pos >= b[j].hi) ++j;
  }
}

Runs add(std::span<const Run> a, std::span<const Run> b) {
  Runs out;
  addInto(out, a, b);
  return out;
}

// Sorted runs that overlap, summed pairwise (a custom post-condition that
// names a contribution twice).
Runs runsOfOverlapping(const Runs& sorted) {
  std::vector<Runs> level;
  for (const Run& x : sorted) level.push_back(Runs{x});
  while (level.size() > 1) {
    std::vector<Runs> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(add(level[i], level[i + 1]));
    if (level.size() % 2 == 1) next.push_back(std::move(level.back()));
    level = std::move(next);
  }
  return level.empty() ? Runs{} : std::move(level.front());
}

// A value's runs: up to two held here, or a view of a shared list. span()
// points into this object: keep it alive while the span is used.
class RunList {
 public:
  RunList() = default;
  explicit RunList(std::span<const Run> shared) : shared_(shared) {}
  RunList(Run a, Run b, uint32_t n) : own_{a, b}, n_(n) {}
  std::span<const Run> span() const {
    return n_ > 0 ? std::span<const Run>(own_.data(), n_) : shared_;
  }

 private:
  std::array<Run, 2> own_{};
  uint32_t n_ = 0;  // runs held here (0: shared_)
  std::span<const Run> shared_;
};

class Value {
 public:
  Value() = default;  // uninitialized data
  Value(const Value& o) : w_(o.w_) {
    if (kind() == kShared) ++shared()->refs;
  }
  Value(Value&& o) noexcept : w_(o.w_) { o.w_[3] = kNone; }
  Value& operator=(Value o) noexcept {
    std::swap(w_, o.w_);
    return *this;
  }
  ~Value() {
    if (kind() == kShared && --shared()->refs == 0) {
      Shared* p = shared();
      p->~Shared();  // the runs after it are trivially destructible
      ::operator delete(p);
    }
  }

  static Value input(uint32_t id) { return one(Run{id, id + 1, 1}); }
  static Value sum(const Value& a, const Value& b) {
    thread_local Runs runs;  // a sum's runs before they find their home
    addInto(runs, a.runs().span(), b.runs().span());
    const bool garbage = a.garbage() || b.garbage();
    if (!garbage && runs.size() == 1) return one(runs.front());
    if (!garbage && runs.size() == 2 && runs[0].count == 1 && runs[1].count == 1 &&
        runs[1].hi < kTwo) {
      Value v;
      v.w_ = {runs[0].lo, runs[0].hi, runs[1].lo, runs[1].hi | kTwo};
      return v;
    }
    // The runs right after the header, in one allocation.
    void* mem = ::operator new(sizeof(Shared) + runs.size() * sizeof(Run));
    Shared* p = new (mem) Shared{1, static_cast<uint32_t>(runs.size()), garbage};
    std::uninitialized_copy(runs.begin(), runs.end(), reinterpret_cast<Run*>(p + 1));
    Value v;
    std::memcpy(v.w_.data(), &p, sizeof p);
    v.w_[3] = kShared;
    return v;
  }
  RunList runs() const {
    switch (kind()) {
      case kOne:
        return RunList(Run{w_[0], w_[1], w_[2]}, Run{}, 1);
      case kTwo:
        return RunList(Run{w_[0], w_[1], 1}, Run{w_[2], w_[3] & ~kTwo, 1}, 2);
      case kShared:
        return RunList({std::launder(reinterpret_cast<const Run*>(shared() + 1)), shared()->size});
      default:
        return RunList();
    }
  }
  bool garbage() const { return kind() == kNone || (kind() == kShared && shared()->garbage); }

 private:
  // Several runs, or garbage mixed in: shared by the copies (one thread
  // verifies an algorithm, so the count need not be atomic).
  struct Shared {
    uint32_t refs;
    uint32_t size;  // runs, stored right after it
    bool garbage;   // uninitialized data mixed in
  };
  static_assert(alignof(Shared) >= alignof(Run) && sizeof(Shared) % alignof(Run) == 0);
  static Value one(Run r) {
    Value v;
    v.w_ = {r.lo, r.hi, r.count, kOne};
    return v;
  }
  Shared* shared() const {
    Shared* p;
    std::memcpy(&p, w_.data(), sizeof p);
    return p;
  }
  // w_[3] says what the value is: kNone, uninitialized data alone; kOne,
  // the run (w_[0], w_[1]) x w_[2]; kShared, a Shared's address in w_[0..1];
  // or, with its top bit (kTwo) set, two runs of count 1, [w_[0], w_[1]) and
  // [w_[2], w_[3] without the bit): a ring's partial sum that wraps past the
  // last rank (ids below 2^31; larger ones take a Shared). 16 bytes.
  static constexpr uint32_t kNone = 0, kOne = 1, kShared = 2, kTwo = 0x80000000u;
  uint32_t kind() const { return (w_[3] & kTwo) != 0 ? kTwo : w_[3]; }
  std::array<uint32_t, 4> w_ = {0, 0, 0, kNone};
};
static_assert(sizeof(void*) <= 2 * sizeof(uint32_t));
static_assert(sizeof(Value) == 16);

// Replacement local operand for a reducing receive (remote-operand probe).
using OperandOverride = std::map<NodeId, std::pair<Buffer, int>>;

class SymbolicRun {
 public:
  // `writers`: also record the step that last wrote each chunk (what a
  // finding names); a correct algorithm's run does without (4 bytes a
  // chunk slot: 134 MB at 4096 ranks).
  SymbolicRun(const StepGraph& g, const CallModel& m, const OperandOverride& ov, bool writers)
      : g_(g), m_(m), ov_(ov) {
    const auto& a = g.algo();
    // Out of place, input chunk k is slot k (CallModel::slot), and a
    // correct algorithm never writes it: those slots are not stored, only
    // the ones written (0.27 GB at 4096 ranks).
    implicit_ = m.inplace() ? 0 : m.inputChunks();
    state_.resize(a.ngpus);
    if (writers) lastWriter_.resize(a.ngpus);
    for (int r = 0; r < a.ngpus; ++r) {
      state_[r].assign(static_cast<size_t>(m.slotCount(r) - implicit_), Value{});
      if (writers) lastWriter_[r].assign(m.slotCount(r), kNoNode);
      if (implicit_ == 0)
        for (int k = 0; k < m.inputChunks(); ++k) state_[r][m.inputSlot(r, k)] = inputValue(r, k);
    }
    // A queue per connection (channel, sender, receiver), by each
    // threadblock's global index: the graph pairs a connection's sends
    // with its receives in order, one threadblock owns each end, and the
    // topological order runs a send before its receive, so the k-th
    // receive takes the k-th message. Only messages in flight are held
    // (every message of the run at once took 20 bytes a sent chunk:
    // 670 MB at 4096 ranks).
    std::map<std::tuple<int, int, int>, int32_t> ids;
    auto id = [&](int channel, int from, int to) {
      return ids.try_emplace({channel, from, to}, static_cast<int32_t>(ids.size())).first->second;
    };
    for (const ir::Rank& r : a.ranks)
      for (const ir::Threadblock& tb : r.tbs) {
        sendQueue_.push_back(tb.sendPeer >= 0 ? id(tb.channel, r.id, tb.sendPeer) : -1);
        recvQueue_.push_back(tb.recvPeer >= 0 ? id(tb.channel, tb.recvPeer, r.id) : -1);
      }
    queues_.resize(ids.size());
  }

  Value inputValue(int r, int k) const {
    return Value::input(static_cast<uint32_t>(k) * static_cast<uint32_t>(g_.algo().ngpus) +
                        static_cast<uint32_t>(r));
  }

  void run() {
    for (NodeId n : g_.topoOrder()) exec(n);
  }

  Value at(int rank, int slot) const {
    if (slot >= implicit_) return state_[rank][static_cast<size_t>(slot - implicit_)];
    auto it = written_.find(key(rank, slot));
    return it != written_.end() ? it->second : inputValue(rank, slot);
  }
  bool writers() const { return !lastWriter_.empty(); }
  NodeId lastWriter(int rank, int slot) const { return lastWriter_[rank][slot]; }
  const std::vector<NodeId>& outOfBuffer() const { return outOfBuffer_; }

 private:
  int slotOf(NodeId n, Buffer b, int idx) {
    int s = m_.slot(g_.rankOf(n), b, idx);
    if (s < 0 && (outOfBuffer_.empty() || outOfBuffer_.back() != n)) outOfBuffer_.push_back(n);
    return s;
  }
  static uint64_t key(int rank, int slot) {
    return static_cast<uint64_t>(rank) << 32 | static_cast<uint32_t>(slot);
  }
  Value read(NodeId n, Buffer b, int idx) {
    int s = slotOf(n, b, idx);
    return s < 0 ? Value{} : at(g_.rankOf(n), s);
  }
  void write(NodeId n, Buffer b, int idx, Value v) {
    int s = slotOf(n, b, idx);
    if (s < 0) return;
    const int r = g_.rankOf(n);
    if (s >= implicit_)
      state_[r][static_cast<size_t>(s - implicit_)] = std::move(v);
    else
      written_[key(r, s)] = std::move(v);
    if (!lastWriter_.empty()) lastWriter_[r][s] = n;
  }

  void exec(NodeId n) {
    const ir::Step& st = g_.step(n);
    if (st.type == ir::StepType::kNop) return;
    Buffer srcBuf = st.srcBuf;
    int srcOff = st.srcOff;
    if (auto it = ov_.find(n); it != ov_.end()) std::tie(srcBuf, srcOff) = it->second;
    // The connections it receives on and sends on.
    Queue* in =
        ir::receives(st.type)
            ? &queues_[static_cast<size_t>(recvQueue_[static_cast<size_t>(g_.globalTbOf(n))])]
            : nullptr;
    Queue* out =
        ir::sends(st.type)
            ? &queues_[static_cast<size_t>(sendQueue_[static_cast<size_t>(g_.globalTbOf(n))])]
            : nullptr;
    for (int i = 0; i < st.count; ++i) {
      Value v;
      switch (st.type) {
        case ir::StepType::kSend:
          v = read(n, srcBuf, srcOff + i);
          break;
        case ir::StepType::kRecv:
        case ir::StepType::kRecvCopySend:
          v = in->pop();  // each message is received exactly once
          break;
        case ir::StepType::kRecvReduceSend:
        case ir::StepType::kRecvReduceCopy:
        case ir::StepType::kRecvReduceCopySend:
          v = Value::sum(in->pop(), read(n, srcBuf, srcOff + i));
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
      if (out != nullptr) out->values.push_back(std::move(v));
    }
  }

  const StepGraph& g_;
  const CallModel& m_;
  const OperandOverride& ov_;
  int implicit_ = 0;                             // leading slots not stored: input chunks
  std::vector<std::vector<Value>> state_;        // [rank][slot - implicit_]
  std::unordered_map<uint64_t, Value> written_;  // implicit slots written: (rank, slot)
  std::vector<std::vector<NodeId>> lastWriter_;
  // A connection's messages sent and not yet received: values[head..].
  struct Queue {
    std::vector<Value> values;
    size_t head = 0;
    Value pop() {
      CHORUS_CHECK(head < values.size(), "a receive ran before its send");
      Value v = std::move(values[head++]);
      if (head == values.size()) {
        values.clear();
        head = 0;
      } else if (head >= 1024 && 2 * head >= values.size()) {
        values.erase(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(head));
        head = 0;
      }
      return v;
    }
  };
  std::vector<Queue> queues_;
  std::vector<int32_t> sendQueue_, recvQueue_;  // by global threadblock: its queue, or -1
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

// The canonical runs of a list of contribution ranges (any order, overlaps
// counted twice).
Runs runsOf(const std::vector<CallModel::Contributions>& cs, int ngpus) {
  Runs parts;
  for (const CallModel::Contributions& c : cs) {
    const auto base = static_cast<uint32_t>(c.chunk) * static_cast<uint32_t>(ngpus);
    if (c.toRank > c.fromRank)
      parts.push_back(
          Run{base + static_cast<uint32_t>(c.fromRank), base + static_cast<uint32_t>(c.toRank), 1});
  }
  std::sort(parts.begin(), parts.end(), [](const Run& x, const Run& y) { return x.lo < y.lo; });
  Runs out;
  for (const Run& p : parts) {
    if (!out.empty() && p.lo < out.back().hi) return runsOfOverlapping(parts);
    append(out, p.lo, p.hi, p.count);
  }
  return out;
}

// Every contribution id, rank-major (rank * inputChunks + chunk), sorted,
// repeated by its count up to twice (what the messages tell: present,
// missing, or counted more than once): for messages about a wrong chunk.
std::vector<uint32_t> expand(std::span<const Run> runs, int ngpus, int inputChunks) {
  std::vector<uint32_t> ids;
  for (const Run& x : runs)
    for (uint32_t t = x.lo; t < x.hi; ++t)
      for (uint32_t c = 0; c < std::min<uint32_t>(x.count, 2); ++c)
        ids.push_back(t % static_cast<uint32_t>(ngpus) * static_cast<uint32_t>(inputChunks) +
                      t / static_cast<uint32_t>(ngpus));
  std::sort(ids.begin(), ids.end());
  return ids;
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
      const Runs wanted = runsOf(*want, a.ngpus);
      int slot = m.outputSlot(r, k);
      const Value& got = run.at(r, slot);
      if (!got.garbage() && std::ranges::equal(got.runs().span(), wanted)) continue;
      // Wrong: the terms one by one (rank-major ids, as the messages name them).
      const std::vector<uint32_t> w = expand(wanted, a.ngpus, m.inputChunks());
      const std::vector<uint32_t> terms = expand(got.runs().span(), a.ngpus, m.inputChunks());
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
      NodeId writer = run.writers() ? run.lastWriter(r, slot) : kNoNode;
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
        const uint32_t id =
            static_cast<uint32_t>(k) * static_cast<uint32_t>(a.ngpus) + static_cast<uint32_t>(r);
        if (!got.garbage() && std::ranges::equal(got.runs().span(), Runs{Run{id, id + 1, 1}}))
          continue;
        NodeId writer = run.writers() ? run.lastWriter(r, slot) : kNoNode;
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
  SymbolicRun run(g, m, none, /*writers=*/false);
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
  {
    // Wrong: run again recording writers, so each finding names the step
    // that last wrote its chunk.
    SymbolicRun located(g, m, none, /*writers=*/true);
    located.run();
    best = compare(g, m, located, bestRoot,
                   m.rooted() ? form + " (root " + std::to_string(bestRoot) + ")" : form);
  }

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
    SymbolicRun fixed(g, m, probe, /*writers=*/false);
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

namespace {

// Per threadblock of a rank, its steps with a dependency, grouped by the
// threadblock they depend on: in step order, each with the latest step of
// that threadblock any of them up to it waits for.
class DependencyIndex {
 public:
  explicit DependencyIndex(const ir::Rank& rank) : on_(rank.tbs.size()) {
    for (const ir::Threadblock& tb : rank.tbs)
      for (int si = 0; si < static_cast<int>(tb.steps.size()); ++si) {
        const ir::Step& st = tb.steps[si];
        if (st.depTb < 0) continue;
        auto& runs = on_[static_cast<size_t>(tb.id)];
        auto run =
            std::find_if(runs.begin(), runs.end(), [&](const Run& r) { return r.tb == st.depTb; });
        if (run == runs.end()) run = runs.insert(runs.end(), Run{st.depTb, {}, {}});
        run->steps.push_back(si);
        run->latest.push_back(run->latest.empty() ? st.depStep
                                                  : std::max(run->latest.back(), st.depStep));
      }
  }
  // Whether `x` happens before `y` (two steps of the rank) because `y`, or a
  // step before it in its threadblock, depends on `x` or a later step of
  // `x`'s threadblock.
  bool ordered(const StepGraph& g, NodeId x, NodeId y) const {
    for (const Run& run : on_[static_cast<size_t>(g.tbOf(y))]) {
      if (run.tb != g.tbOf(x)) continue;
      auto upTo = std::upper_bound(run.steps.begin(), run.steps.end(), g.stepOf(y));
      return upTo != run.steps.begin() &&
             run.latest[static_cast<size_t>(upTo - run.steps.begin() - 1)] >= g.stepOf(x);
    }
    return false;
  }

 private:
  struct Run {
    int tb;
    std::vector<int> steps, latest;
  };
  std::vector<std::vector<Run>> on_;  // by threadblock id
};

}  // namespace

bool checkRaces(StepGraph& g, const CallModel& m, DiagnosticList& diags) {
  const auto& a = g.algo();
  std::string form = m.inplace() ? "in-place" : "out-of-place";
  struct Access {
    NodeId node;
    bool write;
  };
  // Candidate pairs: same rank and chunk slot, different threadblocks, at
  // least one write. Only their threadblocks need happens-before clocks,
  // and only those of one rank at a time: a pass per rank keeps the clocks
  // (steps x that rank's threadblocks) small, where one pass for all ranks
  // held steps x every rank's threadblocks (130 MB at 64 ranks all-pairs).
  std::vector<std::vector<std::pair<Access, Access>>> candidates(static_cast<size_t>(a.ngpus));
  std::vector<std::vector<int>> tracked(static_cast<size_t>(a.ngpus));
  size_t cells = 0;  // the clocks' work over every pass
  for (int r = 0; r < a.ngpus; ++r) {
    auto& mine = candidates[static_cast<size_t>(r)];
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
            mine.emplace_back(acc[i], acc[j]);
    }
    // Most pairs are ordered by a dependency of one threadblock on the
    // other (a copy, then the sends that wait for it): such a pair needs no
    // clocks. Only the rest are tracked.
    const DependencyIndex deps(a.ranks[r]);
    std::erase_if(mine, [&](const std::pair<Access, Access>& xy) {
      return deps.ordered(g, xy.first.node, xy.second.node) ||
             deps.ordered(g, xy.second.node, xy.first.node);
    });
    if (mine.empty()) continue;
    std::vector<char> isTracked(a.ranks[r].tbs.size(), 0);
    for (const auto& [x, y] : mine) isTracked[g.tbOf(x.node)] = isTracked[g.tbOf(y.node)] = 1;
    for (size_t t = 0; t < isTracked.size(); ++t)
      if (isTracked[t])
        tracked[static_cast<size_t>(r)].push_back(g.globalTbOf(g.node(r, static_cast<int>(t), 0)));
    cells += g.size() * tracked[static_cast<size_t>(r)].size();
  }
  if (cells > kMaxClockCells) return false;

  std::set<std::pair<NodeId, NodeId>> reported;
  size_t suppressed = 0;
  for (int r = 0; r < a.ngpus; ++r) {
    if (candidates[static_cast<size_t>(r)].empty()) continue;
    if (!g.computeClocks(tracked[static_cast<size_t>(r)])) return false;
    for (const auto& [x, y] : candidates[static_cast<size_t>(r)]) {
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
      diags.add(DiagCode::kRace,
                ir::siteLocation(a, g.rankOf(later), g.tbOf(later), g.stepOf(later)),
                form + ": " + g.describe(later) + " " + verb(al) + " a chunk that " +
                    g.describe(earlier) + " " + verb(ae) +
                    ", and no dependency or message orders the two");
    }
  }
  if (suppressed > 0) {
    diags.add(DiagCode::kRace, ir::siteLocation(a, -1),
              form + ": " + std::to_string(suppressed) + " more race(s) not shown");
  }
  return true;
}

}  // namespace chorus::verify
