#include "ir/json_io.h"

#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/io.h"
#include "ir/json_parse.h"
#include "ir/mscclpp_plan.h"
#include "ir/xml_writer.h"

namespace chorus::ir {

using nlohmann::json;

std::string writeJson(const Algorithm& a) {
  json ranks = json::array();
  for (const Rank& r : a.ranks) {
    json tbs = json::array();
    for (const Threadblock& tb : r.tbs) {
      json steps = json::array();
      for (const Step& s : tb.steps) {
        steps.push_back(json{{"type", stepTypeName(s.type)},
                             {"srcbuf", std::string(1, bufferLetter(s.srcBuf))},
                             {"srcoff", s.srcOff},
                             {"dstbuf", std::string(1, bufferLetter(s.dstBuf))},
                             {"dstoff", s.dstOff},
                             {"cnt", s.count},
                             {"depid", s.depTb},
                             {"deps", s.depStep},
                             {"hasdep", s.hasDep ? 1 : 0}});
        if (s.lag != 0) steps.back()["lag"] = s.lag;
      }
      tbs.push_back(json{{"id", tb.id},
                         {"send", tb.sendPeer},
                         {"recv", tb.recvPeer},
                         {"chan", tb.channel},
                         {"steps", std::move(steps)}});
    }
    ranks.push_back(json{{"id", r.id},
                         {"i_chunks", r.inputChunks},
                         {"o_chunks", r.outputChunks},
                         {"s_chunks", r.scratchChunks},
                         {"tbs", std::move(tbs)}});
  }
  json doc = {{"format", "chorus-algorithm"},
              {"version", kJsonFormatVersion},
              {"name", a.name},
              {"proto", protocolName(a.protocol)},
              {"nchannels", a.nchannels},
              {"nchunksperloop", a.nchunksPerLoop},
              {"ngpus", a.ngpus},
              {"coll", a.collectiveName},
              {"inplace", a.inplace ? 1 : 0},
              {"outofplace", a.outofplace ? 1 : 0},
              {"minBytes", a.minBytes},
              {"maxBytes", a.maxBytes}};
  if (a.sliceBytes > 0) doc["sliceBytes"] = a.sliceBytes;
  doc["ranks"] = std::move(ranks);
  // Invalid UTF-8 (possible in an IR built by hand) is replaced, never thrown.
  return doc.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

Status writeJsonFile(const Algorithm& a, const std::string& path) {
  return writeTextFile(writeJson(a), path);
}

namespace {

// Walks a parsed document, reporting problems by JSON path.
class JsonReader {
 public:
  explicit JsonReader(const std::string& file) : file_(file) {}

  void fail(const std::string& path, DiagCode code, const std::string& msg) {
    Location l;
    l.file = file_;
    diags_.add(code, l, (path.empty() ? std::string() : path + ": ") + msg);
  }

  template <typename T>
  bool num(const json& obj, const std::string& path, const char* key, T& out,
           bool required = true) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) fail(path, DiagCode::kMissingAttribute, std::string("missing '") + key + "'");
      return false;
    }
    if (!it->is_number_integer()) {
      fail(path, DiagCode::kBadAttribute, std::string("'") + key + "' must be an integer");
      return false;
    }
    if constexpr (std::is_unsigned_v<T>) {
      if (it->is_number_unsigned()) {
        const auto v = it->template get<uint64_t>();
        if (v > std::numeric_limits<T>::max()) {
          fail(path, DiagCode::kBadAttribute, std::string("'") + key + "' is out of range");
          return false;
        }
        out = static_cast<T>(v);
        return true;
      }
      fail(path, DiagCode::kBadAttribute, std::string("'") + key + "' must be non-negative");
      return false;
    } else {
      auto v = it->template get<int64_t>();
      if (v < INT32_MIN || v > INT32_MAX) {
        fail(path, DiagCode::kBadAttribute, std::string("'") + key + "' is out of range");
        return false;
      }
      out = static_cast<T>(v);
      return true;
    }
  }

  bool flag(const json& obj, const std::string& path, const char* key, bool& out) {
    int v = 0;
    if (!num(obj, path, key, v)) return false;
    if (v != 0 && v != 1) {
      fail(path, DiagCode::kBadAttribute, std::string("'") + key + "' must be 0 or 1");
      return false;
    }
    out = v == 1;
    return true;
  }

  template <typename E>
  bool word(const json& obj, const std::string& path, const char* key, E& out,
            std::optional<E> (*parse)(std::string_view)) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) {
      fail(path, DiagCode::kMissingAttribute, std::string("missing string '") + key + "'");
      return false;
    }
    auto e = parse(it->template get<std::string>());
    if (!e) {
      fail(path, DiagCode::kBadAttribute,
           std::string("'") + key + "' = \"" + it->template get<std::string>() + "\" is invalid");
      return false;
    }
    out = *e;
    return true;
  }

  const json* array(const json& obj, const std::string& path, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_array()) {
      fail(path, DiagCode::kBadStructure, std::string("missing array '") + key + "'");
      return nullptr;
    }
    return &*it;
  }

  void read(const json& doc, Algorithm& a) {
    if (!doc.is_object()) {
      fail("", DiagCode::kBadStructure, "top level must be an object");
      return;
    }
    auto fmt = doc.find("format");
    if (fmt == doc.end() || *fmt != "chorus-algorithm") {
      fail("", DiagCode::kBadStructure, "'format' must be \"chorus-algorithm\"");
      return;
    }
    int version = 0;
    if (num(doc, "", "version", version) && version != kJsonFormatVersion) {
      fail("", DiagCode::kBadAttribute,
           "unsupported version " + std::to_string(version) + " (this build reads " +
               std::to_string(kJsonFormatVersion) + ")");
    }
    if (auto it = doc.find("name"); it != doc.end() && it->is_string()) a.name = *it;
    word(doc, "", "proto", a.protocol, parseProtocol);
    num(doc, "", "nchannels", a.nchannels);
    num(doc, "", "nchunksperloop", a.nchunksPerLoop);
    num(doc, "", "ngpus", a.ngpus);
    if (auto it = doc.find("coll"); it != doc.end() && it->is_string()) {
      std::string c = *it;
      a.collective = parseCollective(c);
      a.collectiveName =
          a.collective == CollectiveKind::kCustom ? c : std::string(collectiveName(a.collective));
    } else {
      fail("", DiagCode::kMissingAttribute, "missing string 'coll'");
    }
    flag(doc, "", "inplace", a.inplace);
    flag(doc, "", "outofplace", a.outofplace);
    num(doc, "", "minBytes", a.minBytes);
    num(doc, "", "maxBytes", a.maxBytes);
    num(doc, "", "sliceBytes", a.sliceBytes, /*required=*/false);
    const json* ranks = array(doc, "", "ranks");
    if (!ranks) return;
    for (size_t ri = 0; ri < ranks->size(); ++ri) {
      const json& jr = (*ranks)[ri];
      std::string rp = "ranks[" + std::to_string(ri) + "]";
      Rank r;
      num(jr, rp, "id", r.id);
      num(jr, rp, "i_chunks", r.inputChunks);
      num(jr, rp, "o_chunks", r.outputChunks);
      num(jr, rp, "s_chunks", r.scratchChunks);
      if (const json* tbs = array(jr, rp, "tbs")) {
        for (size_t ti = 0; ti < tbs->size(); ++ti) {
          const json& jt = (*tbs)[ti];
          std::string tp = rp + ".tbs[" + std::to_string(ti) + "]";
          Threadblock tb;
          num(jt, tp, "id", tb.id);
          num(jt, tp, "send", tb.sendPeer);
          num(jt, tp, "recv", tb.recvPeer);
          num(jt, tp, "chan", tb.channel);
          if (const json* steps = array(jt, tp, "steps")) {
            for (size_t si = 0; si < steps->size(); ++si) {
              const json& js = (*steps)[si];
              std::string sp = tp + ".steps[" + std::to_string(si) + "]";
              Step s;
              word(js, sp, "type", s.type, parseStepType);
              word(js, sp, "srcbuf", s.srcBuf, parseBuffer);
              num(js, sp, "srcoff", s.srcOff);
              word(js, sp, "dstbuf", s.dstBuf, parseBuffer);
              num(js, sp, "dstoff", s.dstOff);
              num(js, sp, "cnt", s.count);
              num(js, sp, "depid", s.depTb);
              num(js, sp, "deps", s.depStep);
              flag(js, sp, "hasdep", s.hasDep);
              num(js, sp, "lag", s.lag, /*required=*/false);
              tb.steps.push_back(s);
            }
          }
          r.tbs.push_back(std::move(tb));
        }
      }
      std::stable_sort(r.tbs.begin(), r.tbs.end(),
                       [](const Threadblock& x, const Threadblock& y) { return x.id < y.id; });
      a.ranks.push_back(std::move(r));
    }
    std::stable_sort(a.ranks.begin(), a.ranks.end(),
                     [](const Rank& x, const Rank& y) { return x.id < y.id; });
  }

  DiagnosticList take() { return std::move(diags_); }

 private:
  std::string file_;
  DiagnosticList diags_;
};

}  // namespace

std::optional<json> parseJsonText(std::string_view text, const std::string& fileName, DiagCode code,
                                  DiagnosticList& out) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    Location l;
    l.file = fileName;
    SourcePos p = LineMap(text).at(e.byte > 0 ? e.byte - 1 : 0);
    l.line = p.line;
    l.column = p.column;
    out.add(code, l, std::string("malformed JSON: ") + e.what());
  } catch (const json::exception& e) {  // e.g. a number past double's range (no position)
    Location l;
    l.file = fileName;
    out.add(code, l, std::string("malformed JSON: ") + e.what());
  }
  return std::nullopt;
}

ReadResult readJson(std::string_view text, const std::string& fileName) {
  ReadResult out;
  std::optional<json> parsed = parseJsonText(text, fileName, DiagCode::kXmlSyntax, out.diagnostics);
  if (!parsed) return out;
  const json& doc = *parsed;
  Algorithm a;
  a.sourceFile = fileName;
  JsonReader reader(fileName);
  reader.read(doc, a);
  out.diagnostics = reader.take();
  if (!out.diagnostics.hasErrors()) out.algorithm = std::move(a);
  return out;
}

ReadResult readAlgorithmFile(const std::string& path, const ReadOptions& options) {
  Result<std::string> text = readTextFile(path);
  if (!text.isOk()) {
    ReadResult r;
    Location l;
    l.file = path;
    r.diagnostics.add(DiagCode::kIoFailure, l, "cannot read file: " + text.status().message());
    return r;
  }
  const std::string& t = text.value();
  size_t first = t.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && t[first] == '{') {
    if (!mscclpp::looksLikePlan(t)) return readJson(t, path);
    if (options.plans != nullptr && options.plans->lower != nullptr)
      return options.plans->lower(t, path);
    ReadResult r;
    Location l;
    l.file = path;
    r.diagnostics.add(DiagCode::kIoFailure, l,
                      "an MSCCL++ execution plan, which this reader cannot run (it needs the "
                      "verifier: chorus, the C API and the Python package read plans)");
    return r;
  }
  return readXml(t, path, options);
}

}  // namespace chorus::ir
