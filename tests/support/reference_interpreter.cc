#include "tests/support/reference_interpreter.h"

#include <deque>
#include <map>
#include <tuple>
#include <vector>

namespace chorus::testing {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

const char* outcomeName(Outcome o) {
  switch (o) {
    case Outcome::kCorrect:
      return "correct";
    case Outcome::kWrongResult:
      return "wrong result";
    case Outcome::kDeadlock:
      return "deadlock";
    case Outcome::kInvalid:
      return "invalid";
    case Outcome::kUnsupported:
      return "unsupported";
  }
  return "?";
}

InterpretResult interpret(const ir::Algorithm& a, bool inplace, uint64_t seed) {
  using ir::Buffer;
  const int N = a.ngpus, C = a.nchunksPerLoop;
  if (N < 1 || C < 1 || static_cast<int>(a.ranks.size()) != N) return {Outcome::kInvalid, "shape"};
  int in = 0, out = 0;
  int c = 0;
  switch (a.collective) {
    case CollectiveKind::kAllReduce:
      in = out = C;
      break;
    case CollectiveKind::kAllToAll:
      in = out = C;
      break;
    case CollectiveKind::kAllGather:
      in = C / N;
      out = C;
      break;
    case CollectiveKind::kReduceScatter:
      in = C;
      out = C / N;
      break;
    default:
      return {Outcome::kUnsupported, "collective"};
  }
  if (a.collective != CollectiveKind::kAllReduce && C % N)
    return {Outcome::kInvalid, "indivisible"};
  c = C / N;

  // Memory: per rank, a map from (buffer, index) to a cell in `mem`.
  std::vector<std::vector<uint64_t>> mem(N);
  auto cell = [&](int r, Buffer b, int idx) -> uint64_t* {
    if (r < 0 || r >= N || idx < 0) return nullptr;
    const ir::Rank& rk = a.ranks[r];
    if (b == Buffer::kScratch) {
      if (idx >= rk.scratchChunks) return nullptr;
      return &mem[r][static_cast<size_t>(in + out + idx)];
    }
    if (b == Buffer::kInput && idx >= in) return nullptr;
    if (b == Buffer::kOutput && idx >= out) return nullptr;
    if (!inplace) return &mem[r][static_cast<size_t>(b == Buffer::kInput ? idx : in + idx)];
    // In place: one user buffer; the input and output are views of it.
    switch (a.collective) {
      case CollectiveKind::kAllGather:
        return &mem[r][static_cast<size_t>(b == Buffer::kInput ? r * c + idx : idx)];
      case CollectiveKind::kReduceScatter:
        return &mem[r][static_cast<size_t>(b == Buffer::kOutput ? r * c + idx : idx)];
      default:
        return &mem[r][static_cast<size_t>(idx)];
    }
  };
  auto inputValue = [&](int r, int k) {
    return mix(seed * 7919 + static_cast<uint64_t>(r) * 65537 + k);
  };
  for (int r = 0; r < N; ++r) {
    if (a.ranks[r].id != r || a.ranks[r].scratchChunks < 0) return {Outcome::kInvalid, "ranks"};
    mem[r].resize(static_cast<size_t>(in + out + a.ranks[r].scratchChunks));
    for (size_t i = 0; i < mem[r].size(); ++i) mem[r][i] = mix(~seed ^ (r * 1000003ull + i));
    for (int k = 0; k < in; ++k) *cell(r, Buffer::kInput, k) = inputValue(r, k);
  }

  // Connections: (channel, from, to) -> FIFO of messages.
  std::map<std::tuple<int, int, int>, std::deque<std::vector<uint64_t>>> queues;
  std::vector<std::vector<int>> pc(N);
  std::vector<std::vector<std::vector<bool>>> done(N);
  for (int r = 0; r < N; ++r) {
    pc[r].assign(a.ranks[r].tbs.size(), 0);
    done[r].resize(a.ranks[r].tbs.size());
    for (size_t t = 0; t < a.ranks[r].tbs.size(); ++t) {
      if (a.ranks[r].tbs[t].id != static_cast<int>(t)) return {Outcome::kInvalid, "tb ids"};
      done[r][t].assign(a.ranks[r].tbs[t].steps.size(), false);
    }
  }

  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < N; ++r) {
      for (size_t t = 0; t < a.ranks[r].tbs.size(); ++t) {
        const ir::Threadblock& tb = a.ranks[r].tbs[t];
        while (pc[r][t] < static_cast<int>(tb.steps.size())) {
          const ir::Step& s = tb.steps[pc[r][t]];
          if (s.depTb >= 0) {
            if (s.depTb >= static_cast<int>(done[r].size()) || s.depStep < 0 ||
                s.depStep >= static_cast<int>(done[r][s.depTb].size()))
              return {Outcome::kInvalid, "dependency"};
            if (!done[r][s.depTb][s.depStep]) break;
          }
          if (s.count < 0) return {Outcome::kInvalid, "count"};
          std::vector<uint64_t> incoming;
          if (ir::receives(s.type)) {
            if (tb.recvPeer < 0 || tb.recvPeer >= N) return {Outcome::kInvalid, "recv peer"};
            auto& q = queues[{tb.channel, tb.recvPeer, r}];
            if (q.empty()) break;
            incoming = std::move(q.front());
            q.pop_front();
            if (static_cast<int>(incoming.size()) != s.count) return {Outcome::kInvalid, "count"};
          }
          std::vector<uint64_t> outgoing;
          for (int i = 0; i < s.count && s.type != ir::StepType::kNop; ++i) {
            uint64_t v = 0;
            uint64_t* src = ir::readsSrc(s.type) ? cell(r, s.srcBuf, s.srcOff + i) : nullptr;
            uint64_t* dst = (ir::writesDst(s.type) || ir::readsDst(s.type))
                                ? cell(r, s.dstBuf, s.dstOff + i)
                                : nullptr;
            if (ir::readsSrc(s.type) && !src) return {Outcome::kInvalid, "src out of buffer"};
            if ((ir::writesDst(s.type) || ir::readsDst(s.type)) && !dst)
              return {Outcome::kInvalid, "dst out of buffer"};
            switch (s.type) {
              case ir::StepType::kSend:
                v = *src;
                break;
              case ir::StepType::kRecv:
              case ir::StepType::kRecvCopySend:
                v = incoming[i];
                break;
              case ir::StepType::kRecvReduceSend:
              case ir::StepType::kRecvReduceCopy:
              case ir::StepType::kRecvReduceCopySend:
                v = incoming[i] + *src;
                break;
              case ir::StepType::kCopy:
                v = *src;
                break;
              case ir::StepType::kReduce:
                v = *dst + *src;
                break;
              case ir::StepType::kNop:
                break;
            }
            if (ir::writesDst(s.type)) *dst = v;
            outgoing.push_back(v);
          }
          if (ir::sends(s.type)) {
            if (tb.sendPeer < 0 || tb.sendPeer >= N) return {Outcome::kInvalid, "send peer"};
            queues[{tb.channel, r, tb.sendPeer}].push_back(std::move(outgoing));
          }
          done[r][t][pc[r][t]] = true;
          ++pc[r][t];
          progress = true;
        }
      }
    }
  }
  for (int r = 0; r < N; ++r)
    for (size_t t = 0; t < pc[r].size(); ++t)
      if (pc[r][t] < static_cast<int>(a.ranks[r].tbs[t].steps.size()))
        return {Outcome::kDeadlock, "rank " + std::to_string(r) + " tb " + std::to_string(t)};
  for (const auto& [key, q] : queues)
    if (!q.empty()) return {Outcome::kInvalid, "unreceived message"};

  for (int r = 0; r < N; ++r) {
    for (int k = 0; k < out; ++k) {
      uint64_t want = 0;
      switch (a.collective) {
        case CollectiveKind::kAllReduce:
          for (int q = 0; q < N; ++q) want += inputValue(q, k);
          break;
        case CollectiveKind::kAllGather:
          want = inputValue(k / c, k % c);
          break;
        case CollectiveKind::kReduceScatter:
          for (int q = 0; q < N; ++q) want += inputValue(q, r * c + k);
          break;
        case CollectiveKind::kAllToAll:
          want = inputValue(k / c, r * c + k % c);
          break;
        default:
          break;
      }
      if (*cell(r, Buffer::kOutput, k) != want)
        return {Outcome::kWrongResult,
                "rank " + std::to_string(r) + " output " + std::to_string(k)};
    }
    if (!inplace) {
      for (int k = 0; k < in; ++k)
        if (*cell(r, Buffer::kInput, k) != inputValue(r, k))
          return {Outcome::kWrongResult, "input modified on rank " + std::to_string(r)};
    }
  }
  return {Outcome::kCorrect, ""};
}

}  // namespace chorus::testing
