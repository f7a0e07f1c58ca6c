#include "ir/xml_writer.h"

#include <charconv>
#include <concepts>

#include "core/io.h"

namespace chorus::ir {
namespace {

// The document is written as a stream, in the layout pugixml's
// format_indent gives (two spaces a level, " />" closing an empty element),
// which earlier versions wrote through a pugixml DOM: a synthesized
// schedule has millions of steps, and the DOM took 9 s for 181 MB of XML
// (mi250:2's 256-chunk allgather) against a fraction of a second streamed.
// tests/ir/xml_test.cc holds the two byte for byte.
class Out {
 public:
  void raw(std::string_view s) { text_.append(s); }
  // An attribute: ` name="value"`, the value escaped as pugixml escapes
  // attribute values (&, <, " and control characters; > and bytes past
  // ASCII as they are).
  void attr(std::string_view name, std::string_view value) {
    open(name);
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '&') {
        text_.append("&amp;");
      } else if (c == '<') {
        text_.append("&lt;");
      } else if (c == '"') {
        text_.append("&quot;");
      } else if (u < 32) {
        const char code[] = {'&', '#', static_cast<char>('0' + u / 10),
                             static_cast<char>('0' + u % 10), ';'};
        text_.append(code, sizeof code);
      } else {
        text_.push_back(c);
      }
    }
    text_.push_back('"');
  }
  template <std::integral T>
  void attr(std::string_view name, T value) {
    open(name);
    char digits[24];  // any 64-bit integer
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
    (void)ec;
    text_.append(digits, end);
    text_.push_back('"');
  }
  std::string take() { return std::move(text_); }

 private:
  void open(std::string_view name) {
    text_.push_back(' ');
    text_.append(name);
    text_.append("=\"");
  }
  std::string text_;
};

}  // namespace

std::string writeXml(const Algorithm& a) {
  Out out;
  out.raw("<algo");
  out.attr("name", a.name);
  out.attr("proto", protocolName(a.protocol));
  out.attr("nchannels", a.nchannels);
  out.attr("nchunksperloop", a.nchunksPerLoop);
  out.attr("ngpus", a.ngpus);
  out.attr("coll", a.collectiveName);
  out.attr("inplace", a.inplace ? 1 : 0);
  out.attr("outofplace", a.outofplace ? 1 : 0);
  out.attr("minBytes", a.minBytes);
  out.attr("maxBytes", a.maxBytes);
  if (a.sliceBytes > 0) out.attr("sliceBytes", a.sliceBytes);
  if (a.ranks.empty()) {
    out.raw(" />\n");
    return out.take();
  }
  out.raw(">\n");
  for (const Rank& r : a.ranks) {
    out.raw("  <gpu");
    out.attr("id", r.id);
    out.attr("i_chunks", r.inputChunks);
    out.attr("o_chunks", r.outputChunks);
    out.attr("s_chunks", r.scratchChunks);
    if (r.tbs.empty()) {
      out.raw(" />\n");
      continue;
    }
    out.raw(">\n");
    for (const Threadblock& tb : r.tbs) {
      out.raw("    <tb");
      out.attr("id", tb.id);
      out.attr("send", tb.sendPeer);
      out.attr("recv", tb.recvPeer);
      out.attr("chan", tb.channel);
      if (tb.steps.empty()) {
        out.raw(" />\n");
        continue;
      }
      out.raw(">\n");
      for (size_t i = 0; i < tb.steps.size(); ++i) {
        const Step& s = tb.steps[i];
        out.raw("      <step");
        out.attr("s", i);
        out.attr("type", stepTypeName(s.type));
        const char src[] = {bufferLetter(s.srcBuf)}, dst[] = {bufferLetter(s.dstBuf)};
        out.attr("srcbuf", std::string_view(src, 1));
        out.attr("srcoff", s.srcOff);
        out.attr("dstbuf", std::string_view(dst, 1));
        out.attr("dstoff", s.dstOff);
        out.attr("cnt", s.count);
        out.attr("depid", s.depTb);
        out.attr("deps", s.depStep);
        out.attr("hasdep", s.hasDep ? 1 : 0);
        if (s.lag != 0) out.attr("lag", s.lag);
        out.raw(" />\n");
      }
      out.raw("    </tb>\n");
    }
    out.raw("  </gpu>\n");
  }
  out.raw("</algo>\n");
  return out.take();
}

Status writeXmlFile(const Algorithm& a, const std::string& path) {
  return writeTextFile(writeXml(a), path);
}

}  // namespace chorus::ir
