#include "ir/ir.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>

#include "core/collectives.h"

namespace chorus::ir {
using detail::info;
using detail::kStepTypes;

char bufferLetter(Buffer b) { return b == Buffer::kInput ? 'i' : b == Buffer::kOutput ? 'o' : 's'; }

std::optional<Buffer> parseBuffer(std::string_view s) {
  if (s == "i") return Buffer::kInput;
  if (s == "o") return Buffer::kOutput;
  if (s == "s") return Buffer::kScratch;
  return std::nullopt;
}

std::string_view protocolName(Protocol p) {
  switch (p) {
    case Protocol::kSimple:
      return "Simple";
    case Protocol::kLL:
      return "LL";
    case Protocol::kLL128:
      return "LL128";
  }
  return "?";
}

std::optional<Protocol> parseProtocol(std::string_view s) {
  if (s == "Simple") return Protocol::kSimple;
  if (s == "LL") return Protocol::kLL;
  if (s == "LL128") return Protocol::kLL128;
  return std::nullopt;
}

std::string_view stepTypeName(StepType t) { return info(t).name; }

std::optional<StepType> parseStepType(std::string_view s) {
  for (size_t i = 0; i < kStepTypes.size(); ++i) {
    if (kStepTypes[i].name == s) return static_cast<StepType>(i);
  }
  return std::nullopt;
}

bool Step::operator==(const Step& o) const {
  return std::tie(type, srcBuf, srcOff, dstBuf, dstOff, count, depTb, depStep, hasDep, lag) ==
         std::tie(o.type, o.srcBuf, o.srcOff, o.dstBuf, o.dstOff, o.count, o.depTb, o.depStep,
                  o.hasDep, o.lag);
}

bool Threadblock::operator==(const Threadblock& o) const {
  return std::tie(id, sendPeer, recvPeer, channel, steps) ==
         std::tie(o.id, o.sendPeer, o.recvPeer, o.channel, o.steps);
}

bool Rank::operator==(const Rank& o) const {
  return std::tie(id, inputChunks, outputChunks, scratchChunks, tbs) ==
         std::tie(o.id, o.inputChunks, o.outputChunks, o.scratchChunks, o.tbs);
}

bool Algorithm::operator==(const Algorithm& o) const {
  return std::tie(name, protocol, nchannels, nchunksPerLoop, ngpus, collective, collectiveName,
                  inplace, outofplace, minBytes, maxBytes, sliceBytes,
                  ranks) == std::tie(o.name, o.protocol, o.nchannels, o.nchunksPerLoop, o.ngpus,
                                     o.collective, o.collectiveName, o.inplace, o.outofplace,
                                     o.minBytes, o.maxBytes, o.sliceBytes, o.ranks);
}

namespace {

class Fnv1a {
 public:
  template <class T>
  void add(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
    for (size_t i = 0; i < sizeof(T); ++i) hash_ = (hash_ ^ bytes[i]) * 0x100000001b3ULL;
  }
  void add(const std::string& text) {
    add(text.size());
    for (char c : text) add(c);
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace

uint64_t contentDigest(const Algorithm& a) {
  Fnv1a h;
  h.add(a.name);
  h.add(a.protocol);
  h.add(a.nchannels);
  h.add(a.nchunksPerLoop);
  h.add(a.ngpus);
  h.add(a.collective);
  h.add(a.collectiveName);
  h.add(a.inplace);
  h.add(a.outofplace);
  h.add(a.sliceBytes);
  h.add(a.ranks.size());
  for (const Rank& r : a.ranks) {
    h.add(r.id);
    h.add(r.inputChunks);
    h.add(r.outputChunks);
    h.add(r.scratchChunks);
    h.add(r.tbs.size());
    for (const Threadblock& tb : r.tbs) {
      h.add(tb.id);
      h.add(tb.sendPeer);
      h.add(tb.recvPeer);
      h.add(tb.channel);
      h.add(tb.steps.size());
      for (const Step& s : tb.steps) {
        h.add(s.type);
        h.add(s.srcBuf);
        h.add(s.srcOff);
        h.add(s.dstBuf);
        h.add(s.dstOff);
        h.add(s.count);
        h.add(s.depTb);
        h.add(s.depStep);
        h.add(s.hasDep);
        h.add(s.lag);
      }
    }
  }
  return h.value();
}

size_t Algorithm::totalSteps() const {
  size_t n = 0;
  for (const auto& r : ranks)
    for (const auto& tb : r.tbs) n += tb.steps.size();
  return n;
}

size_t Algorithm::totalThreadblocks() const {
  size_t n = 0;
  for (const auto& r : ranks) n += r.tbs.size();
  return n;
}

uint16_t Threadblock::maxLag() const {
  uint16_t lag = 0;
  for (const Step& s : steps) lag = std::max(lag, s.lag);
  return lag;
}

bool hasLags(const Algorithm& a) {
  for (const Rank& r : a.ranks)
    for (const Threadblock& tb : r.tbs)
      if (tb.maxLag() != 0) return true;
  return false;
}

Algorithm sliceOrder(const Algorithm& a, std::vector<std::vector<std::vector<int>>>* position) {
  Algorithm out = a;
  std::vector<std::vector<std::vector<int>>> at(a.ranks.size());
  for (size_t ri = 0; ri < a.ranks.size(); ++ri) {
    const Rank& r = a.ranks[ri];
    at[ri].resize(r.tbs.size());
    for (size_t t = 0; t < r.tbs.size(); ++t) {
      const std::vector<Step>& steps = r.tbs[t].steps;
      std::vector<int> order(steps.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
        return steps[static_cast<size_t>(x)].lag < steps[static_cast<size_t>(y)].lag;
      });
      at[ri][t].resize(steps.size());
      for (size_t k = 0; k < order.size(); ++k)
        at[ri][t][static_cast<size_t>(order[k])] = static_cast<int>(k);
      std::vector<Step>& mine = out.ranks[ri].tbs[t].steps;
      for (size_t k = 0; k < order.size(); ++k) mine[k] = steps[static_cast<size_t>(order[k])];
    }
  }
  for (size_t ri = 0; ri < out.ranks.size(); ++ri)
    for (Threadblock& tb : out.ranks[ri].tbs)
      for (Step& s : tb.steps) {
        s.lag = 0;
        // (Only dependencies that resolve: validateStructure reports the others.)
        if (s.depTb >= 0 && static_cast<size_t>(s.depTb) < at[ri].size() && s.depStep >= 0 &&
            static_cast<size_t>(s.depStep) < at[ri][static_cast<size_t>(s.depTb)].size())
          s.depStep = at[ri][static_cast<size_t>(s.depTb)][static_cast<size_t>(s.depStep)];
      }
  if (position != nullptr) *position = std::move(at);
  return out;
}

size_t defaultSliceBytes(Protocol p) {
  switch (p) {
    case Protocol::kSimple:
      return size_t{2} << 20;
    case Protocol::kLL:
      return size_t{32} << 10;
    case Protocol::kLL128:
      return 576000;
  }
  return size_t{2} << 20;
}

size_t sliceBytesOf(const Algorithm& a) {
  return a.sliceBytes > 0 ? static_cast<size_t>(a.sliceBytes) : defaultSliceBytes(a.protocol);
}

size_t countMultiplier(const Algorithm& a) {
  return chorus::countMultiplier(a.collective, a.ngpus);
}

size_t countQuantum(const Algorithm& a) {
  auto c = static_cast<size_t>(a.nchunksPerLoop);
  return c / std::gcd(c, countMultiplier(a));
}

}  // namespace chorus::ir
