#include "ir/xml_writer.h"

#include <pugixml.hpp>
#include <sstream>

#include "core/io.h"

namespace chorus::ir {
namespace {

void addInt(pugi::xml_node& n, const char* name, long long v) {
  n.append_attribute(name).set_value(v);
}

}  // namespace

std::string writeXml(const Algorithm& a) {
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("algo");
  root.append_attribute("name").set_value(a.name.c_str());
  root.append_attribute("proto").set_value(std::string(protocolName(a.protocol)).c_str());
  addInt(root, "nchannels", a.nchannels);
  addInt(root, "nchunksperloop", a.nchunksPerLoop);
  addInt(root, "ngpus", a.ngpus);
  root.append_attribute("coll").set_value(a.collectiveName.c_str());
  addInt(root, "inplace", a.inplace ? 1 : 0);
  addInt(root, "outofplace", a.outofplace ? 1 : 0);
  root.append_attribute("minBytes").set_value(static_cast<unsigned long long>(a.minBytes));
  root.append_attribute("maxBytes").set_value(static_cast<unsigned long long>(a.maxBytes));
  for (const Rank& r : a.ranks) {
    pugi::xml_node g = root.append_child("gpu");
    addInt(g, "id", r.id);
    addInt(g, "i_chunks", r.inputChunks);
    addInt(g, "o_chunks", r.outputChunks);
    addInt(g, "s_chunks", r.scratchChunks);
    for (const Threadblock& tb : r.tbs) {
      pugi::xml_node t = g.append_child("tb");
      addInt(t, "id", tb.id);
      addInt(t, "send", tb.sendPeer);
      addInt(t, "recv", tb.recvPeer);
      addInt(t, "chan", tb.channel);
      for (size_t i = 0; i < tb.steps.size(); ++i) {
        const Step& s = tb.steps[i];
        pugi::xml_node e = t.append_child("step");
        addInt(e, "s", static_cast<long long>(i));
        e.append_attribute("type").set_value(std::string(stepTypeName(s.type)).c_str());
        const char src[2] = {bufferLetter(s.srcBuf), 0};
        const char dst[2] = {bufferLetter(s.dstBuf), 0};
        e.append_attribute("srcbuf").set_value(src);
        addInt(e, "srcoff", s.srcOff);
        e.append_attribute("dstbuf").set_value(dst);
        addInt(e, "dstoff", s.dstOff);
        addInt(e, "cnt", s.count);
        addInt(e, "depid", s.depTb);
        addInt(e, "deps", s.depStep);
        addInt(e, "hasdep", s.hasDep ? 1 : 0);
      }
    }
  }
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_indent | pugi::format_no_declaration, pugi::encoding_utf8);
  return out.str();
}

Status writeXmlFile(const Algorithm& a, const std::string& path) {
  return writeTextFile(writeXml(a), path);
}

}  // namespace chorus::ir
