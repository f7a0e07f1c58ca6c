#include "verify/collective.h"

#include <nlohmann/json.hpp>

#include "core/collectives.h"
#include "core/io.h"

namespace chorus::verify {

using ir::Buffer;
using nlohmann::json;

std::optional<PostCondition> readPostCondition(const std::string& path, DiagnosticList& diags) {
  Result<std::string> text = readTextFile(path);
  if (!text.isOk()) {
    Location loc;
    loc.file = path;
    diags.add(DiagCode::kSpecInvalid, loc, "cannot read file: " + text.status().message());
    return std::nullopt;
  }
  return parsePostCondition(text.value(), path, diags);
}

std::optional<PostCondition> parsePostCondition(std::string_view text, const std::string& name,
                                                DiagnosticList& diags) {
  Location loc;
  loc.file = name;
  auto fail = [&](const std::string& msg) {
    diags.add(DiagCode::kSpecInvalid, loc, msg);
    return std::nullopt;
  };
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return fail("not a JSON object");
  PostCondition pc;
  auto intField = [&](const json& o, const char* key, int& out, const std::string& where) {
    auto it = o.find(key);
    if (it == o.end() || !it->is_number_integer() || it->get<long long>() < 0 ||
        it->get<long long>() > (1 << 30)) {
      fail(where + "'" + key + "' must be a non-negative integer");
      return false;
    }
    out = it->get<int>();
    return true;
  };
  if (auto it = doc.find("collective"); it != doc.end() && it->is_string()) {
    pc.collective = it->get<std::string>();
  } else {
    return fail("missing string 'collective'");
  }
  if (!intField(doc, "input_chunks", pc.inputChunks, "") ||
      !intField(doc, "output_chunks", pc.outputChunks, ""))
    return std::nullopt;
  auto post = doc.find("postcondition");
  if (post == doc.end() || !post->is_array()) return fail("missing array 'postcondition'");
  for (size_t i = 0; i < post->size(); ++i) {
    const json& e = (*post)[i];
    std::string where = "postcondition[" + std::to_string(i) + "]: ";
    if (!e.is_object()) return fail(where + "not an object");
    PostCondition::Entry entry;
    if (!intField(e, "rank", entry.rank, where) || !intField(e, "chunk", entry.chunk, where))
      return std::nullopt;
    if (entry.chunk >= pc.outputChunks)
      return fail(where + "chunk " + std::to_string(entry.chunk) + " >= output_chunks");
    auto holds = e.find("holds");
    if (holds == e.end() || !holds->is_array()) return fail(where + "missing array 'holds'");
    for (const json& h : *holds) {
      if (!h.is_array() || h.size() != 2 || !h[0].is_number_integer() ||
          !h[1].is_number_integer() || h[0].get<long long>() < 0 ||
          h[0].get<long long>() > (1 << 30) || h[1].get<long long>() < 0 ||
          h[1].get<long long>() >= pc.inputChunks)
        return fail(where + "'holds' entries must be [rank, input chunk < input_chunks]");
      entry.holds.emplace_back(h[0].get<int>(), h[1].get<int>());
    }
    pc.entries.push_back(std::move(entry));
  }
  return pc;
}

std::string writePostCondition(const PostCondition& pc) {
  nlohmann::ordered_json head = {{"collective", pc.collective},
                                 {"input_chunks", pc.inputChunks},
                                 {"output_chunks", pc.outputChunks}};
  std::string out = head.dump();
  out.pop_back();  // the entries follow, one per line
  out += ",\"postcondition\":[";
  for (size_t i = 0; i < pc.entries.size(); ++i) {
    const PostCondition::Entry& e = pc.entries[i];
    nlohmann::ordered_json entry = {{"rank", e.rank}, {"chunk", e.chunk}, {"holds", e.holds}};
    out.append(i == 0 ? "\n  " : ",\n  ");
    out.append(entry.dump());
  }
  out += "\n]}\n";
  return out;
}

std::optional<CallModel> CallModel::make(const ir::Algorithm& a, bool inplace,
                                         const PostCondition* spec, std::string* whyNot,
                                         DiagCode* whyCode) {
  CallModel m;
  *whyCode = DiagCode::kSemanticsUnproven;
  m.algo_ = &a;
  m.inplace_ = inplace;
  m.kind_ = spec ? CollectiveKind::kCustom : a.collective;
  const int C = a.nchunksPerLoop, N = a.ngpus;
  auto blocks = [&]() -> bool {
    if (C % N != 0) {
      *whyCode = DiagCode::kIndivisible;
      *whyNot = "nchunksperloop=" + std::to_string(C) +
                " is not a multiple of ngpus=" + std::to_string(N) + ", as " + a.collectiveName +
                " needs";
      return false;
    }
    m.perRank_ = C / N;
    return true;
  };
  const CollectiveTraits& t = traits(m.kind_);
  if (m.kind_ == CollectiveKind::kCustom) {
    if (!spec) {
      *whyNot = "collective '" + a.collectiveName + "' has no built-in specification";
      return std::nullopt;
    }
    m.spec_ = spec;
    m.in_ = spec->inputChunks;
    m.out_ = spec->outputChunks;
    m.alias_ = Alias::kSame;
    m.specTable_.assign(N, std::vector<std::vector<std::pair<int, int>>>(m.out_));
    m.specHas_.assign(N, std::vector<bool>(m.out_, false));
    for (const auto& e : spec->entries) {
      if (e.rank >= N) {
        *whyNot = "post-condition names rank " + std::to_string(e.rank) + " >= ngpus";
        return std::nullopt;
      }
      for (auto [q, k] : e.holds) {
        if (q >= N) {
          *whyNot = "post-condition names contribution of rank " + std::to_string(q);
          return std::nullopt;
        }
        m.specTable_[e.rank][e.chunk].emplace_back(q, k);
      }
      m.specHas_[e.rank][e.chunk] = true;
    }
  } else if (t.source == nullptr) {
    *whyNot = "'" + a.collectiveName +
              "' depends on per-call counts or peers that the file does not encode";
    return std::nullopt;
  } else {
    // Collectives with a per-rank block (every buffer but one of count)
    // split the chunks into n blocks.
    if ((t.input != Extent::kCount || t.output != Extent::kCount) && !blocks()) return std::nullopt;
    const size_t count = static_cast<size_t>(C) / countMultiplier(m.kind_, N);
    m.in_ = static_cast<int>(extentElems(t.input, count, N));
    m.out_ = static_cast<int>(extentElems(t.output, count, N));
    m.alias_ = t.inPlace == InPlace::kSame            ? Alias::kSame
               : t.inPlace == InPlace::kInputInOutput ? Alias::kInputInOutput
                                                      : Alias::kOutputInInput;
  }
  if (!inplace) m.alias_ = Alias::kNone;
  m.rooted_ = t.rooted;
  return m;
}

int CallModel::slot(int rank, Buffer b, int idx) const {
  if (idx < 0) return -1;
  int main = alias_ == Alias::kNone ? in_ + out_ : std::max(in_, out_);
  if (b == Buffer::kScratch) {
    return idx < algo_->ranks[rank].scratchChunks ? main + idx : -1;
  }
  bool isIn = b == Buffer::kInput;
  if (idx >= (isIn ? in_ : out_)) return -1;
  switch (alias_) {
    case Alias::kNone:
      return isIn ? idx : in_ + idx;
    case Alias::kSame:
      return idx;
    case Alias::kInputInOutput:
      return isIn ? rank * perRank_ + idx : idx;
    case Alias::kOutputInInput:
      return isIn ? idx : rank * perRank_ + idx;
  }
  return -1;
}

std::string CallModel::outputName(int rank, int k) const {
  auto name = [](char b, int idx) { return std::string(1, b) + "[" + std::to_string(idx) + "]"; };
  switch (alias_) {
    case Alias::kSame:
      return name(algo_->ranks[rank].outputChunks > 0 ? 'o' : 'i', k);
    case Alias::kOutputInInput:
      return name('i', rank * perRank_ + k);
    case Alias::kNone:
    case Alias::kInputInOutput:
      break;
  }
  return name('o', k);
}

int CallModel::slotCount(int rank) const {
  int main = alias_ == Alias::kNone ? in_ + out_ : std::max(in_, out_);
  return main + algo_->ranks[rank].scratchChunks;
}

std::optional<std::vector<CallModel::Contributions>> CallModel::expected(int r, int k,
                                                                         int root) const {
  using Many = std::vector<Contributions>;
  if (kind_ == CollectiveKind::kCustom) {
    if (!specHas_[r][k]) return std::nullopt;
    Many all;
    for (auto [q, chunk] : specTable_[r][k]) all.push_back({chunk, q, q + 1});
    return all;
  }
  auto from = traits(kind_).source(algo_->ngpus, root, r, static_cast<size_t>(perRank_),
                                   static_cast<size_t>(k));
  if (!from) return std::nullopt;
  return Many{{static_cast<int>(from->index), from->first, from->last}};
}

}  // namespace chorus::verify
