#include "ir/xml_reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <pugixml.hpp>

#include "core/io.h"

namespace chorus::ir {

LineMap::LineMap(std::string_view text) {
  starts_.push_back(0);
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') starts_.push_back(i + 1);
  }
}

SourcePos LineMap::at(size_t offset) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
  size_t line = static_cast<size_t>(it - starts_.begin());  // 1-based
  size_t col = offset - starts_[line - 1] + 1;
  return SourcePos{static_cast<int>(line), static_cast<int>(col)};
}

namespace {

// Parsing context for one file: the raw text (to locate attributes), the
// line map, and where diagnostics go.
class Reader {
 public:
  Reader(std::string_view text, const std::string& file, const ReadOptions& o)
      : text_(text),
        lines_(text),
        file_(file),
        focus_(o.focus),
        programs_(o.programs),
        chunkedBytes_(o.chunkedBytes) {}

  ReadResult run();
  ReadResult program(const pugi::xml_node& n);

 private:
  Location locAt(SourcePos p) const {
    Location l;
    l.file = file_;
    l.line = p.line;
    l.column = p.column;
    return l;
  }
  // An element's offset in the file: offset_debug() is within the buffer
  // pugixml parsed, which starts at base_ (a fragment, runChunked).
  ptrdiff_t offsetOf(const pugi::xml_node& n) const {
    ptrdiff_t off = n.offset_debug();
    return off < 0 ? off : off + static_cast<ptrdiff_t>(base_);
  }
  SourcePos nodePos(const pugi::xml_node& n) const {
    // offset_debug() points at the element name; report the '<' before it.
    ptrdiff_t off = offsetOf(n);
    if (off <= 0) return SourcePos{1, 1};
    return lines_.at(static_cast<size_t>(off - 1));
  }
  // Position of attribute `name` within element `n`'s start tag, or the
  // element's position when it cannot be found (e.g. entity-expanded names).
  SourcePos attrPos(const pugi::xml_node& n, const char* name) const {
    ptrdiff_t off = offsetOf(n);
    if (off < 0) return SourcePos{1, 1};
    size_t start = static_cast<size_t>(off);
    size_t end = text_.find('>', start);
    if (end == std::string_view::npos) end = text_.size();
    std::string_view tag = text_.substr(start, end - start);
    std::string_view key(name);
    for (size_t p = tag.find(key); p != std::string_view::npos; p = tag.find(key, p + 1)) {
      bool boundaryBefore = p > 0 && (tag[p - 1] == ' ' || tag[p - 1] == '\t' ||
                                      tag[p - 1] == '\n' || tag[p - 1] == '\r');
      size_t q = p + key.size();
      while (q < tag.size() && (tag[q] == ' ' || tag[q] == '\t' || tag[q] == '\n')) ++q;
      if (boundaryBefore && q < tag.size() && tag[q] == '=') return lines_.at(start + p);
    }
    return nodePos(n);
  }

  void error(DiagCode code, SourcePos p, std::string msg) {
    diags_.add(code, locAt(p), std::move(msg));
  }

  // Integer attribute. Returns nullopt (after a diagnostic) when absent and
  // required, or malformed. `fallback` is used when absent and not required.
  template <typename T>
  std::optional<T> intAttr(const pugi::xml_node& n, const char* name, bool required,
                           std::optional<T> fallback = std::nullopt) {
    pugi::xml_attribute a = n.attribute(name);
    if (!a) {
      if (required) {
        error(DiagCode::kMissingAttribute, nodePos(n),
              std::string("<") + n.name() + "> lacks attribute '" + name + "'");
      }
      return fallback;
    }
    std::string_view v = a.value();
    // Tolerate surrounding whitespace, nothing else.
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    T out{};
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (v.empty() || ec != std::errc() || ptr != v.data() + v.size()) {
      error(DiagCode::kBadAttribute, attrPos(n, name),
            std::string("attribute '") + name + "' = \"" + a.value() +
                "\" is not an integer in range");
      return std::nullopt;
    }
    return out;
  }

  std::optional<std::string> strAttr(const pugi::xml_node& n, const char* name, bool required) {
    pugi::xml_attribute a = n.attribute(name);
    if (!a) {
      if (required) {
        error(DiagCode::kMissingAttribute, nodePos(n),
              std::string("<") + n.name() + "> lacks attribute '" + name + "'");
      }
      return std::nullopt;
    }
    if (!isValidUtf8(a.value())) {
      error(DiagCode::kBadAttribute, attrPos(n, name),
            std::string("attribute '") + name + "' is not valid UTF-8");
      return std::nullopt;
    }
    return std::string(a.value());
  }

  std::optional<bool> boolAttr(const pugi::xml_node& n, const char* name, bool required) {
    auto v = intAttr<int>(n, name, required);
    if (!v) return std::nullopt;
    if (*v != 0 && *v != 1) {
      error(DiagCode::kBadAttribute, attrPos(n, name),
            std::string("attribute '") + name + "' must be 0 or 1, not " + std::to_string(*v));
      return std::nullopt;
    }
    return *v == 1;
  }

  template <typename E>
  std::optional<E> enumAttr(const pugi::xml_node& n, const char* name,
                            std::optional<E> (*parse)(std::string_view), const char* allowed) {
    auto s = strAttr(n, name, true);
    if (!s) return std::nullopt;
    auto e = parse(*s);
    if (!e) {
      error(DiagCode::kBadAttribute, attrPos(n, name),
            std::string("attribute '") + name + "' = \"" + *s + "\" is not one of " + allowed);
    }
    return e;
  }

  // A large file of the plain shape, read one <gpu> at a time
  // (runChunked); nullopt: not that shape, or not well-formed (the whole
  // document is then parsed, and its errors reported as usual).
  std::optional<ReadResult> runChunked();
  void readAlgo(const pugi::xml_node& n, Algorithm& a);
  void readAlgoAttributes(const pugi::xml_node& n, Algorithm& a);
  void finishAlgo(const pugi::xml_node& n, int gpuElements, Algorithm& a);
  void readGpu(const pugi::xml_node& n, Rank& r);
  void readTb(const pugi::xml_node& n, int rank, Threadblock& tb);
  // Returns the step's declared position (attribute `s`), -1 if unreadable.
  int readStep(const pugi::xml_node& n, Step& s);

  std::string_view text_;
  LineMap lines_;
  std::string file_;
  int focus_;
  const ProgramFiles* programs_;
  // Past this size, read one <gpu> at a time (runChunked): a document of
  // every step at once takes about four times the file (1.56 GB for the
  // 256 MB XML of a 1024-rank ring allreduce).
  size_t chunkedBytes_;
  DiagnosticList diags_;
  size_t base_ = 0;  // where the buffer pugixml parsed starts in text_
};

// The end of the tag that starts at `lt` (its '>'), quotes respected;
// npos if it does not end.
size_t tagEnd(std::string_view text, size_t lt) {
  char quote = 0;
  for (size_t i = lt + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '>') {
      return i;
    }
  }
  return std::string_view::npos;
}

// Whether the tag at `lt` is <name ...> or </name ...> (after `prefix`).
bool tagIs(std::string_view text, size_t lt, std::string_view prefix, std::string_view name) {
  std::string_view t = text.substr(lt);
  if (t.substr(0, prefix.size()) != prefix) return false;
  t.remove_prefix(prefix.size());
  if (t.substr(0, name.size()) != name || t.size() == name.size()) return false;
  const char c = t[name.size()];
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '>' || c == '/';
}

// The end of the end tag </name> at `lt` (its '>'), npos when there is no
// such well-formed tag there: only blanks may follow the name (`</algo/>`
// is not one).
size_t endTagEnd(std::string_view text, size_t lt, std::string_view name) {
  if (!tagIs(text, lt, "</", name)) return std::string_view::npos;
  for (size_t i = lt + 2 + name.size(); i < text.size(); ++i) {
    if (text[i] == '>') return i;
    if (std::isspace(static_cast<unsigned char>(text[i])) == 0) break;
  }
  return std::string_view::npos;
}

std::optional<ReadResult> Reader::runChunked() {
  // The plain shape only: before <algo>, a declaration and comments (the
  // production files' copyright lines); from it on, no comment, CDATA,
  // DOCTYPE or processing instruction, and <algo> holding only <gpu>
  // elements.
  size_t at = 0;
  for (;;) {
    while (at < text_.size() && std::isspace(static_cast<unsigned char>(text_[at])) != 0) ++at;
    std::string_view open = text_.substr(at, 4), close;
    if (open.substr(0, 2) == "<?")
      close = "?>";
    else if (open == "<!--")
      close = "-->";
    else
      break;
    const size_t end = text_.find(close, at + 2);
    if (end == std::string_view::npos) return std::nullopt;
    at = end + close.size();
  }
  if (text_.find("<!", at) != std::string_view::npos ||
      text_.find("<?", at) != std::string_view::npos)
    return std::nullopt;
  const size_t rootLt = text_.find('<', at);
  if (rootLt == std::string_view::npos || !tagIs(text_, rootLt, "<", "algo")) return std::nullopt;
  const size_t rootGt = tagEnd(text_, rootLt);
  if (rootGt == std::string_view::npos || text_[rootGt - 1] == '/') return std::nullopt;
  auto blank = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i)
      if (std::isspace(static_cast<unsigned char>(text_[i])) == 0) return false;
    return true;
  };
  if (!blank(at, rootLt)) return std::nullopt;
  // <algo>'s start tag alone, closed: its attributes, at their offsets.
  std::string shell(text_.substr(0, rootGt + 1));
  shell += "</algo>";
  pugi::xml_document head;
  if (!head.load_buffer(shell.data(), shell.size(), pugi::parse_default, pugi::encoding_utf8))
    return std::nullopt;
  const pugi::xml_node root = head.child("algo");
  if (!root) return std::nullopt;
  Algorithm algo;
  algo.sourceFile = file_;
  readAlgoAttributes(root, algo);
  int gpuElements = 0;
  size_t pos = rootGt + 1;
  for (;;) {
    const size_t lt = text_.find('<', pos);
    if (lt == std::string_view::npos || !blank(pos, lt)) return std::nullopt;
    if (tagIs(text_, lt, "</", "algo")) {
      const size_t gt = endTagEnd(text_, lt, "algo");
      if (gt == std::string_view::npos || !blank(gt + 1, text_.size())) return std::nullopt;
      break;
    }
    if (!tagIs(text_, lt, "<", "gpu")) return std::nullopt;
    const size_t startGt = tagEnd(text_, lt);
    if (startGt == std::string_view::npos) return std::nullopt;
    size_t end = startGt + 1;  // past the element
    if (text_[startGt - 1] != '/') {
      const size_t close = text_.find("</gpu", startGt);
      if (close == std::string_view::npos) return std::nullopt;
      const size_t closeGt = endTagEnd(text_, close, "gpu");
      if (closeGt == std::string_view::npos) return std::nullopt;
      end = closeGt + 1;
    }
    pugi::xml_document frag;
    if (!frag.load_buffer(text_.data() + lt, end - lt, pugi::parse_default, pugi::encoding_utf8))
      return std::nullopt;
    base_ = lt;
    Rank r;
    readGpu(frag.child("gpu"), r);
    base_ = 0;
    algo.ranks.push_back(std::move(r));
    ++gpuElements;
    pos = end;
  }
  finishAlgo(root, gpuElements, algo);
  ReadResult out;
  out.byGpu = true;
  out.diagnostics = std::move(diags_);
  if (!out.diagnostics.hasErrors()) out.algorithm = std::move(algo);
  return out;
}

ReadResult Reader::run() {
  if (text_.size() >= chunkedBytes_) {
    if (auto r = runChunked()) return std::move(*r);
    diags_ = DiagnosticList();  // what the attempt found is found again below
  }
  ReadResult out;
  pugi::xml_document doc;
  pugi::xml_parse_result pr =
      doc.load_buffer(text_.data(), text_.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!pr) {
    error(DiagCode::kXmlSyntax, lines_.at(static_cast<size_t>(std::max<ptrdiff_t>(pr.offset, 0))),
          std::string("malformed XML: ") + pr.description());
    out.diagnostics = std::move(diags_);
    return out;
  }
  pugi::xml_node root;
  for (pugi::xml_node c : doc.children()) {
    if (c.type() != pugi::node_element) continue;
    if (root || (std::string_view(c.name()) != "algo" && std::string_view(c.name()) != "program")) {
      error(DiagCode::kBadStructure, nodePos(c),
            root ? "more than one top-level element"
                 : std::string("top-level element is <") + c.name() + ">, expected <algo>");
      out.diagnostics = std::move(diags_);
      return out;
    }
    root = c;
  }
  if (!root) {
    error(DiagCode::kBadStructure, SourcePos{1, 1}, "no <algo> element");
    out.diagnostics = std::move(diags_);
    return out;
  }
  if (std::string_view(root.name()) == "program") return program(root);
  Algorithm algo;
  algo.sourceFile = file_;
  readAlgo(root, algo);
  out.diagnostics = std::move(diags_);
  if (!out.diagnostics.hasErrors()) out.algorithm = std::move(algo);
  return out;
}

ReadResult Reader::program(const pugi::xml_node& n) {
  ProgramReference ref;
  ref.file = file_;
  ref.pos = nodePos(n);
  for (pugi::xml_attribute a : n.attributes())
    ref.attributes.push_back({a.name(), a.value(), attrPos(n, a.name())});
  if (n.first_child()) {
    error(DiagCode::kBadStructure, nodePos(n.first_child()),
          "<program> takes attributes only (the program and its options)");
  } else if (programs_ != nullptr && focus_ >= 0 && programs_->part != nullptr) {
    return programs_->part(ref, focus_);
  } else if (programs_ != nullptr && focus_ < 0 && programs_->whole != nullptr) {
    return programs_->whole(ref);
  } else {
    error(DiagCode::kBadStructure, ref.pos,
          "a compact program file (<program>, docs/scale.md): expanding it needs the Chorus "
          "compiler (the chorus command, libchorus or the Python package read it)");
  }
  ReadResult out;
  out.diagnostics = std::move(diags_);
  return out;
}

void Reader::readAlgo(const pugi::xml_node& n, Algorithm& a) {
  readAlgoAttributes(n, a);
  int gpuElements = 0;
  for (pugi::xml_node c : n.children()) {
    if (c.type() != pugi::node_element) continue;
    if (std::string_view(c.name()) != "gpu") continue;  // unknown elements are ignored
    Rank r;
    readGpu(c, r);
    a.ranks.push_back(std::move(r));
    ++gpuElements;
  }
  finishAlgo(n, gpuElements, a);
}

void Reader::readAlgoAttributes(const pugi::xml_node& n, Algorithm& a) {
  a.pos = nodePos(n);
  if (auto v = strAttr(n, "name", false)) a.name = *v;
  if (auto p = enumAttr<Protocol>(n, "proto", parseProtocol, "Simple, LL, LL128")) a.protocol = *p;
  if (auto v = intAttr<int>(n, "nchannels", true)) a.nchannels = *v;
  if (auto v = intAttr<int>(n, "nchunksperloop", true)) a.nchunksPerLoop = *v;
  if (auto c = strAttr(n, "coll", true)) {
    a.collective = parseCollective(*c);
    a.collectiveName =
        a.collective == CollectiveKind::kCustom ? *c : std::string(collectiveName(a.collective));
  }
  if (auto v = boolAttr(n, "inplace", true)) a.inplace = *v;
  bool hasOutOfPlace = static_cast<bool>(n.attribute("outofplace"));
  if (hasOutOfPlace) {
    if (auto v = boolAttr(n, "outofplace", true)) a.outofplace = *v;
  } else {
    a.outofplace = !a.inplace;  // docs/spec/IR.md: missing outofplace means !inplace
  }
  auto minB = intAttr<uint64_t>(n, "minBytes", false, uint64_t{0});
  auto maxB = intAttr<uint64_t>(n, "maxBytes", false, uint64_t{0});
  a.minBytes = minB.value_or(0);
  a.maxBytes = maxB.value_or(0);
  a.sliceBytes = intAttr<uint64_t>(n, "sliceBytes", false, uint64_t{0}).value_or(0);
  a.legacyAttributes = !hasOutOfPlace || !n.attribute("minBytes") || !n.attribute("maxBytes");
}

void Reader::finishAlgo(const pugi::xml_node& n, int gpuElements, Algorithm& a) {
  if (n.attribute("ngpus")) {
    if (auto v = intAttr<int>(n, "ngpus", true)) a.ngpus = *v;
  } else {
    a.ngpus = gpuElements;
    a.legacyAttributes = true;
    diags_.add(DiagCode::kLegacyDialect, locAt(nodePos(n)),
               "<algo> has no 'ngpus'; taking the number of <gpu> elements (" +
                   std::to_string(gpuElements) + ")");
  }
  std::stable_sort(a.ranks.begin(), a.ranks.end(),
                   [](const Rank& x, const Rank& y) { return x.id < y.id; });
}

void Reader::readGpu(const pugi::xml_node& n, Rank& r) {
  r.pos = nodePos(n);
  if (auto v = intAttr<int>(n, "id", true)) r.id = *v;
  if (auto v = intAttr<int>(n, "i_chunks", true)) r.inputChunks = *v;
  if (auto v = intAttr<int>(n, "o_chunks", true)) r.outputChunks = *v;
  if (auto v = intAttr<int>(n, "s_chunks", true)) r.scratchChunks = *v;
  for (pugi::xml_node c : n.children()) {
    if (c.type() != pugi::node_element || std::string_view(c.name()) != "tb") continue;
    Threadblock tb;
    readTb(c, r.id, tb);
    r.tbs.push_back(std::move(tb));
  }
  std::stable_sort(r.tbs.begin(), r.tbs.end(),
                   [](const Threadblock& x, const Threadblock& y) { return x.id < y.id; });
}

void Reader::readTb(const pugi::xml_node& n, int rank, Threadblock& tb) {
  tb.pos = nodePos(n);
  if (auto v = intAttr<int>(n, "id", true)) tb.id = *v;
  if (auto v = intAttr<int>(n, "send", true)) tb.sendPeer = *v;
  if (auto v = intAttr<int>(n, "recv", true)) tb.recvPeer = *v;
  if (auto v = intAttr<int>(n, "chan", true)) tb.channel = *v;
  for (pugi::xml_node c : n.children()) {
    if (c.type() != pugi::node_element || std::string_view(c.name()) != "step") continue;
    Step s;
    int declared = readStep(c, s);
    int position = static_cast<int>(tb.steps.size());
    if (declared >= 0 && declared != position) {
      error(DiagCode::kStepPosition, attrPos(c, "s"),
            "rank " + std::to_string(rank) + " tb " + std::to_string(tb.id) + ": step has s=\"" +
                std::to_string(declared) + "\" but is at position " + std::to_string(position) +
                " (s must count every step, nops included)");
    }
    tb.steps.push_back(s);
  }
}

int Reader::readStep(const pugi::xml_node& n, Step& s) {
  s.pos = nodePos(n);
  auto pos = intAttr<int>(n, "s", true);
  if (auto t =
          enumAttr<StepType>(n, "type", parseStepType, "s, r, rcs, rrs, rrc, rrcs, cpy, re, nop"))
    s.type = *t;
  if (auto b = enumAttr<Buffer>(n, "srcbuf", parseBuffer, "i, o, s")) s.srcBuf = *b;
  if (auto v = intAttr<int>(n, "srcoff", true)) s.srcOff = *v;
  if (auto b = enumAttr<Buffer>(n, "dstbuf", parseBuffer, "i, o, s")) s.dstBuf = *b;
  if (auto v = intAttr<int>(n, "dstoff", true)) s.dstOff = *v;
  if (auto v = intAttr<int>(n, "cnt", true)) s.count = *v;
  if (auto v = intAttr<int>(n, "depid", true)) s.depTb = *v;
  if (auto v = intAttr<int>(n, "deps", true)) s.depStep = *v;
  if (auto v = boolAttr(n, "hasdep", true)) s.hasDep = *v;
  if (auto v = intAttr<uint16_t>(n, "lag", false)) s.lag = *v;
  return pos.value_or(-1);
}

}  // namespace

ReadResult readXml(std::string_view text, const std::string& fileName, const ReadOptions& options) {
  return Reader(text, fileName, options).run();
}

}  // namespace chorus::ir
