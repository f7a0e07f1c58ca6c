#include "topo/json.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/io.h"

namespace chorus::topo {

using nlohmann::json;

Result<Topology> parseTopology(const std::string& text, const std::string& origin) {
  auto bad = [&](const std::string& where, const std::string& what) {
    return Status(StatusCode::kParseError, origin + ": " + where + what);
  };
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return bad("", "not a JSON object");
  Topology t;
  if (auto it = doc.find("name"); it != doc.end()) {
    if (!it->is_string()) return bad("name: ", "must be a string");
    t.name = it->get<std::string>();
  }
  if (auto it = doc.find("memory_bandwidth"); it != doc.end()) {
    if (!it->is_number() || it->get<double>() < 0)
      return bad("memory_bandwidth: ", "must be a number >= 0 (GB/s)");
    t.memoryBandwidth = it->get<double>();
  }
  auto nodes = doc.find("nodes");
  if (nodes == doc.end() || !nodes->is_array()) return bad("", "missing array 'nodes'");
  for (size_t i = 0; i < nodes->size(); ++i) {
    const json& n = (*nodes)[i];
    std::string where = "nodes[" + std::to_string(i) + "]: ";
    if (!n.is_object()) return bad(where, "not an object");
    auto name = n.find("name");
    if (name == n.end() || !name->is_string() || name->get<std::string>().empty())
      return bad(where, "needs a non-empty string 'name'");
    NodeKind kind = NodeKind::kRank;
    if (auto k = n.find("kind");
        k != n.end() && (!k->is_string() || !parseNodeKind(k->get<std::string>(), &kind)))
      return bad(where, "'kind' is rank, switch or nic");
    int box = 0;
    if (auto b = n.find("box"); b != n.end()) {
      if (!b->is_number_integer() || b->get<long long>() < 0 || b->get<long long>() > 1 << 20)
        return bad(where, "'box' must be an integer >= 0");
      box = b->get<int>();
    }
    if (t.findNode(name->get<std::string>()) >= 0)
      return bad(where, "the name '" + name->get<std::string>() + "' is taken");
    int id = t.addNode(name->get<std::string>(), kind, box);
    for (auto [key, cap] : {std::pair{"send_cap", &Node::sendCap}, {"recv_cap", &Node::recvCap}})
      if (auto c = n.find(key); c != n.end()) {
        if (!c->is_number() || c->get<double>() < 0)
          return bad(where, std::string("'") + key + "' must be a number >= 0 (GB/s)");
        t.nodes[static_cast<size_t>(id)].*cap = c->get<double>();
      }
  }
  auto links = doc.find("links");
  if (links == doc.end() || !links->is_array()) return bad("", "missing array 'links'");
  for (size_t i = 0; i < links->size(); ++i) {
    const json& l = (*links)[i];
    std::string where = "links[" + std::to_string(i) + "]: ";
    if (!l.is_object()) return bad(where, "not an object");
    int ends[2] = {-1, -1};
    const char* keys[2] = {"from", "to"};
    for (int e = 0; e < 2; ++e) {
      auto it = l.find(keys[e]);
      if (it == l.end() || !it->is_string())
        return bad(where, std::string("needs '") + keys[e] + "'");
      ends[e] = t.findNode(it->get<std::string>());
      if (ends[e] < 0) return bad(where, "no node named '" + it->get<std::string>() + "'");
    }
    auto bw = l.find("bandwidth");
    if (bw == l.end() || !bw->is_number() || !(bw->get<double>() > 0))
      return bad(where, "needs 'bandwidth' > 0 (GB/s per direction)");
    double latency = 0;
    if (auto it = l.find("latency_us"); it != l.end()) {
      if (!it->is_number() || it->get<double>() < 0) return bad(where, "'latency_us' must be >= 0");
      latency = it->get<double>() * 1e-6;
    }
    LinkKind kind = LinkKind::kGeneric;
    if (auto k = l.find("kind");
        k != l.end() && (!k->is_string() || !parseLinkKind(k->get<std::string>(), &kind)))
      return bad(where, "'kind' is nvlink, nvswitch, xgmi, pcie, infiniband, ethernet or generic");
    bool both = false;
    if (auto it = l.find("both_ways"); it != l.end()) {
      if (!it->is_boolean()) return bad(where, "'both_ways' is true or false");
      both = it->get<bool>();
    }
    if (ends[0] == ends[1]) return bad(where, "a link from a node to itself");
    if (both)
      t.connect(ends[0], ends[1], bw->get<double>(), latency, kind);
    else
      t.addLink(ends[0], ends[1], bw->get<double>(), latency, kind);
  }
  Status st = t.validate();
  if (!st.isOk()) return Status(StatusCode::kInvalidArgument, origin + ": " + st.message());
  return t;
}

Result<Topology> readTopologyFile(const std::string& path) {
  Result<std::string> text = readTextFile(path);
  if (!text.isOk()) return text.status();
  return parseTopology(text.value(), path);
}

namespace {

// The microseconds the reader turns back into exactly `seconds` (it
// multiplies by 1e-6), so written topologies read back unchanged.
double microseconds(double seconds) {
  const double first = seconds * 1e6;
  double up = first, down = first;
  for (int k = 0; k < 8; ++k, up = std::nextafter(up, HUGE_VAL), down = std::nextafter(down, 0.0)) {
    if (up * 1e-6 == seconds) return up;
    if (down * 1e-6 == seconds) return down;
  }
  return first;
}

}  // namespace

std::string writeTopology(const Topology& t) {
  nlohmann::ordered_json doc;
  doc["name"] = t.name;
  doc["memory_bandwidth"] = t.memoryBandwidth;
  doc["nodes"] = nlohmann::ordered_json::array();
  for (const Node& n : t.nodes) {
    nlohmann::ordered_json node = {
        {"name", n.name}, {"kind", nodeKindName(n.kind)}, {"box", n.box}};
    if (n.sendCap > 0) node["send_cap"] = n.sendCap;
    if (n.recvCap > 0) node["recv_cap"] = n.recvCap;
    doc["nodes"].push_back(std::move(node));
  }
  doc["links"] = nlohmann::ordered_json::array();
  for (const Link& l : t.links)
    doc["links"].push_back({{"from", t.nodes[static_cast<size_t>(l.from)].name},
                            {"to", t.nodes[static_cast<size_t>(l.to)].name},
                            {"bandwidth", l.bandwidth},
                            {"latency_us", microseconds(l.latency)},
                            {"kind", linkKindName(l.kind)}});
  // Names from file paths may not be UTF-8: replaced, not thrown on.
  return doc.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace chorus::topo
