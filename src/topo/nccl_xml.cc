#include "topo/nccl_xml.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <pugixml.hpp>

#include "core/io.h"

namespace chorus::topo {

namespace {

constexpr double kNvlinkGBps = 25;    // per link per direction (docs/spec/TOPOLOGIES.md)
constexpr double kPcieDefault = 24;   // a Gen4 x16 link when the file gives no speed
constexpr double kInterCpuGBps = 16;  // socket to socket

// "16 GT/s" x 16 lanes -> GB/s per direction (128b/130b encoding).
double pcieGBps(const pugi::xml_node& pci) {
  double gts = std::atof(pci.attribute("link_speed").as_string(""));
  int width = pci.attribute("link_width").as_int(0);
  if (gts <= 0 || width <= 0) return kPcieDefault;
  return gts * width * (128.0 / 130.0) / 8.0;
}

// "b3/" before the names of box 3's nodes when there are several boxes.
// (Appends: GCC 12 -O3 warns, -Wrestrict, on a ternary concatenation.)
std::string boxPrefix(int boxes, int box) {
  std::string p;
  if (boxes > 1) p.append("b").append(std::to_string(box)).append("/");
  return p;
}

struct Builder {
  Topology& t;
  int box;
  std::string prefix;
  int network;
  struct Gpu {
    int parent;  // its PCI parent node
    std::string busid;
    pugi::xml_node xml;
    double pcie;
  };
  std::vector<Gpu> gpus;
  std::vector<int> cpus;

  int add(const std::string& name, NodeKind kind) { return t.addNode(prefix + name, kind, box); }

  // A pci element's device, under `parent` (a CPU or PCI switch node).
  void pci(const pugi::xml_node& x, int parent) {
    const std::string busid = x.attribute("busid").as_string("");
    const double bw = pcieGBps(x);
    if (pugi::xml_node g = x.child("gpu")) {  // linked once every GPU is known
      gpus.push_back(Gpu{parent, busid, g, bw});
      return;
    }
    if (pugi::xml_node nic = x.child("nic")) {
      int n = add("nic-" + busid, NodeKind::kNic);
      t.connect(parent, n, bw, kUs, LinkKind::kPcie);
      double speed = 0;
      for (pugi::xml_node net : nic.children("net"))
        speed += net.attribute("speed").as_double(0) / 8000.0;  // Mb/s -> GB/s
      if (speed <= 0) speed = 25;
      t.connect(n, network, speed, kUs, LinkKind::kInfiniband);
      return;
    }
    int sw = add("pci-" + busid, NodeKind::kSwitch);
    t.connect(parent, sw, bw, kUs, LinkKind::kPcie);
    for (pugi::xml_node c : x.children("pci")) pci(c, sw);
  }
};

}  // namespace

Result<Topology> parseNcclTopology(const std::string& text, const std::string& origin, int boxes) {
  if (!isValidUtf8(text))  // names come from attributes and go on to JSON
    return Status(StatusCode::kParseError, origin + ": not UTF-8 text");
  pugi::xml_document doc;
  pugi::xml_parse_result pr = doc.load_buffer(text.data(), text.size());
  if (!pr)
    return Status(StatusCode::kParseError, origin + ": not XML (" + std::string(pr.description()) +
                                               " at byte " + std::to_string(pr.offset) + ")");
  pugi::xml_node system = doc.child("system");
  if (!system) return Status(StatusCode::kParseError, origin + ": no <system> element");
  if (boxes < 1 || boxes > 512) return Status(StatusCode::kInvalidArgument, "1 to 512 boxes");
  Topology t;
  t.name = origin;
  if (boxes > 1) t.name.append(":").append(std::to_string(boxes));
  // Ranks first (box-major, each box's GPUs by rank / dev / position), so
  // rank numbers follow the file; everything else after.
  std::vector<std::pair<long, pugi::xml_node>> order;
  for (pugi::xpath_node g : system.select_nodes(".//gpu"))
    order.push_back({g.node().attribute("rank").as_int(
                         g.node().attribute("dev").as_int(static_cast<int>(order.size()))),
                     g.node()});
  if (order.empty()) return Status(StatusCode::kInvalidArgument, origin + ": no <gpu> in the file");
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::map<const void*, int>> rankOf(static_cast<size_t>(boxes));
  for (int b = 0; b < boxes; ++b)
    for (auto& [key, node] : order) {
      int id = t.addNode(boxPrefix(boxes, b) + "gpu" + std::to_string(key), NodeKind::kRank, b);
      rankOf[static_cast<size_t>(b)][node.internal_object()] = id;
    }
  const int network = t.addNode("network", NodeKind::kSwitch);
  for (int b = 0; b < boxes; ++b) {
    Builder bl{t, b, boxPrefix(boxes, b), network, {}, {}};
    for (pugi::xml_node cpu : system.children("cpu")) {
      int c = bl.add("cpu" + std::string(cpu.attribute("numaid").as_string("")), NodeKind::kSwitch);
      for (int other : bl.cpus) t.connect(other, c, kInterCpuGBps, kUs, LinkKind::kGeneric);
      bl.cpus.push_back(c);
      for (pugi::xml_node p : cpu.children("pci")) bl.pci(p, c);
    }
    std::map<std::string, int> byBus;
    int nvswitch = -1;
    for (size_t i = 0; i < bl.gpus.size(); ++i) {
      int id = rankOf[static_cast<size_t>(b)][bl.gpus[i].xml.internal_object()];
      t.connect(bl.gpus[i].parent, id, bl.gpus[i].pcie, kUs, LinkKind::kPcie);
      byBus[bl.gpus[i].busid] = id;
    }
    for (size_t i = 0; i < bl.gpus.size(); ++i) {
      int id = rankOf[static_cast<size_t>(b)][bl.gpus[i].xml.internal_object()];
      double toSwitch = 0;  // anything else over NVLink is an NVSwitch
      for (pugi::xml_node nv : bl.gpus[i].xml.children("nvlink")) {
        double bw = nv.attribute("count").as_int(1) * kNvlinkGBps;
        if (auto it = byBus.find(nv.attribute("target").as_string("")); it != byBus.end())
          t.addLink(id, it->second, bw, 0.5 * kUs, LinkKind::kNvlink);
        else
          toSwitch += bw;
      }
      if (toSwitch > 0) {  // one NVSwitch node per box for all of them
        if (nvswitch < 0) nvswitch = bl.add("nvswitch", NodeKind::kSwitch);
        t.connect(id, nvswitch, toSwitch, 0.35 * kUs, LinkKind::kNvswitch);
      }
    }
  }
  Status st = t.validate();
  if (!st.isOk()) return Status(StatusCode::kInvalidArgument, origin + ": " + st.message());
  return t;
}

Result<Topology> readNcclTopologyFile(const std::string& path, int boxes) {
  Result<std::string> text = readTextFile(path);
  if (!text.isOk()) return text.status();
  return parseNcclTopology(text.value(), path, boxes);
}

}  // namespace chorus::topo
