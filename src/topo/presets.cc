// Presets: capacities from docs/spec/TOPOLOGIES.md (GB/s per direction). Latencies
// are this model's assumptions (docs/topology.md): NVLink / xGMI hop
// 0.5 us, GPU <-> NVSwitch 0.35 us each way, PCIe 1 us, InfiniBand hop 1 us
// (NIC <-> switch), a synthetic link 1 us.
#include "topo/presets.h"

#include <algorithm>
#include <charconv>
#include <iterator>

#include "topo/json.h"
#include "topo/nccl_xml.h"

namespace chorus::topo {

namespace {

constexpr double kNvlinkLat = 0.5 * kUs, kSwitchLat = 0.35 * kUs, kPcieLat = 1 * kUs,
                 kIbLat = 1 * kUs, kSyntheticLat = 1 * kUs;

// Link multiplicities per GPU pair ("a: b x n"), each pair listed once.
struct Pair {
  int a, b, links;
};
// DGX-1's hybrid cube-mesh (MSCCL's numbering).
constexpr Pair kDgx1[] = {{0, 1, 2}, {0, 2, 1}, {0, 3, 1}, {0, 4, 2}, {1, 2, 1}, {1, 3, 2},
                          {1, 5, 1}, {2, 3, 2}, {2, 6, 2}, {3, 7, 1}, {4, 5, 2}, {4, 6, 1},
                          {4, 7, 1}, {5, 6, 1}, {5, 7, 2}, {6, 7, 2}};
// The MI250 box: 16 GCDs, xGMI.
constexpr Pair kMi250[] = {
    {0, 1, 4},   {0, 4, 2},   {0, 8, 1},   {1, 5, 1},   {1, 9, 1},   {1, 10, 1},  {2, 3, 4},
    {2, 6, 1},   {2, 9, 1},   {2, 10, 1},  {3, 7, 2},   {3, 11, 1},  {4, 5, 4},   {4, 6, 1},
    {5, 6, 1},   {5, 7, 1},   {6, 7, 4},   {8, 9, 4},   {8, 12, 2},  {9, 13, 1},  {10, 11, 4},
    {10, 14, 1}, {11, 15, 2}, {12, 13, 4}, {12, 14, 1}, {13, 14, 1}, {13, 15, 1}, {14, 15, 4}};

std::vector<int> addRanks(Topology& t, int count, int box) {
  std::vector<int> ids;
  for (int i = 0; i < count; ++i) ids.push_back(t.addRank(box));
  return ids;
}

void meshBox(Topology& t, const std::vector<int>& gpu, const Pair* pairs, size_t n, double perLink,
             LinkKind kind) {
  for (size_t i = 0; i < n; ++i)
    t.connect(gpu[static_cast<size_t>(pairs[i].a)], gpu[static_cast<size_t>(pairs[i].b)],
              perLink * pairs[i].links, kNvlinkLat, kind);
}

Topology ring(int n, double bw) {
  Topology t;
  auto r = addRanks(t, n, 0);
  for (int i = 0; i < n && n > 1; ++i) {
    if (n == 2 && i == 1) break;  // two ranks: one link pair
    t.connect(r[static_cast<size_t>(i)], r[static_cast<size_t>((i + 1) % n)], bw, kSyntheticLat,
              LinkKind::kGeneric);
  }
  return t;
}

Topology torus(int k, double bw) {
  Topology t;
  auto r = addRanks(t, k * k, 0);
  auto at = [&](int x, int y) { return r[static_cast<size_t>(((y + k) % k) * k + (x + k) % k)]; };
  for (int y = 0; y < k; ++y)
    for (int x = 0; x < k; ++x) {
      if (k > 2 || x + 1 < k)
        t.connect(at(x, y), at(x + 1, y), bw, kSyntheticLat, LinkKind::kGeneric);
      if (k > 2 || y + 1 < k)
        t.connect(at(x, y), at(x, y + 1), bw, kSyntheticLat, LinkKind::kGeneric);
    }
  return t;
}

Topology full(int n, double bw) {
  Topology t;
  auto r = addRanks(t, n, 0);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      t.connect(r[static_cast<size_t>(a)], r[static_cast<size_t>(b)], bw, kSyntheticLat,
                LinkKind::kGeneric);
  return t;
}

// N ranks sharing one GPU, as the CUDA executor's one-GPU worlds run: every
// message crosses the GPU's memory twice (the sender writes a slot, the
// receiver reads it and writes its buffer, each byte read and written), so
// the ranks' links to it share a quarter of the copy bandwidth `gbps`
// (bytes read + written per second) and a rank's local copies and
// reductions get its share of half. A first-order model for predictions
// beside measurements (bench/gpu_bench.sh); it knows no caches.
Topology oneGpu(int n, double gbps) {
  Topology t;
  t.memoryBandwidth = gbps / (2.0 * n);
  auto r = addRanks(t, n, 0);
  int hbm = t.addNode("hbm", NodeKind::kSwitch, 0);
  for (int id : r) t.connect(id, hbm, gbps / (4.0 * n), kSwitchLat, LinkKind::kGeneric);
  return t;
}

// Boxes of `gpus` GPUs on an NVSwitch, one NIC per GPU; NIC g of every box
// on rail switch g (`rails`) or all NICs on one switch. One box has no NICs:
// traffic within a box never leaves it (NCCL does not loop through the
// network), and docs/spec/TOPOLOGIES.md's one-box optimum counts the NVSwitch alone.
Topology switched(int boxes, int gpus, double nvswitch, double nic, bool rails, double memBw) {
  Topology t;
  t.memoryBandwidth = memBw;
  std::vector<int> gpuIds;
  for (int b = 0; b < boxes; ++b) {
    auto g = addRanks(t, gpus, b);
    gpuIds.insert(gpuIds.end(), g.begin(), g.end());
  }
  std::vector<int> fabric;
  for (int s = 0; boxes > 1 && s < (rails ? gpus : 1); ++s)
    fabric.push_back(
        t.addNode(rails ? std::string("rail").append(std::to_string(s)) : "ib", NodeKind::kSwitch));
  for (int b = 0; b < boxes; ++b) {
    int sw = t.addNode("nvswitch" + std::to_string(b), NodeKind::kSwitch, b);
    for (int g = 0; g < gpus; ++g) {
      int gpu = gpuIds[static_cast<size_t>(b * gpus + g)];
      t.connect(gpu, sw, nvswitch, kSwitchLat, LinkKind::kNvswitch);
      if (boxes == 1) continue;
      int n = t.addNode("nic" + std::to_string(b * gpus + g), NodeKind::kNic, b);
      t.connect(gpu, n, nic, kPcieLat, LinkKind::kPcie);
      t.connect(n, fabric[rails ? static_cast<size_t>(g) : 0], nic, kIbLat, LinkKind::kInfiniband);
    }
  }
  return t;
}

Topology mi250(int boxes) {
  Topology t;
  t.memoryBandwidth = 1600;
  int ib = boxes > 1 ? t.addNode("ib", NodeKind::kSwitch) : -1;
  for (int b = 0; b < boxes; ++b) {
    auto g = addRanks(t, 16, b);
    meshBox(t, g, kMi250, std::size(kMi250), 50, LinkKind::kXgmi);
    for (int i = 0; i < 16 && ib >= 0; ++i) {
      int n = t.addNode("nic" + std::to_string(b * 16 + i), NodeKind::kNic, b);
      t.connect(g[static_cast<size_t>(i)], n, 16, kPcieLat, LinkKind::kPcie);
      t.connect(n, ib, 16, kIbLat, LinkKind::kInfiniband);
    }
  }
  return t;
}

// DGX-1 boxes (NVLink2 at 25 per link); NDv2: each double link one 50 arc
// (the same capacities), and two boxes joined by one 12.5 arc each way,
// GPU 1 -> GPU 8 and GPU 9 -> GPU 0 (the model of TACCL and TE-CCL).
Topology dgx1(int boxes, bool ndv2) {
  Topology t;
  t.memoryBandwidth = 900;
  std::vector<int> all;
  for (int b = 0; b < boxes; ++b) {
    auto g = addRanks(t, 8, b);
    meshBox(t, g, kDgx1, std::size(kDgx1), 25, LinkKind::kNvlink);
    all.insert(all.end(), g.begin(), g.end());
  }
  if (ndv2 && boxes == 2) {
    t.addLink(all[1], all[8], 12.5, kIbLat * 2, LinkKind::kInfiniband);
    t.addLink(all[9], all[0], 12.5, kIbLat * 2, LinkKind::kInfiniband);
  }
  return t;
}

// DGX-2: 16 V100 on NVSwitch (125 each); two boxes: odd GPU s of one box
// to even GPU s - 1 of the other, 12.5 (8 arcs each way).
Topology dgx2(int boxes) {
  Topology t;
  t.memoryBandwidth = 900;
  std::vector<std::vector<int>> g;
  for (int b = 0; b < boxes; ++b) {
    g.push_back(addRanks(t, 16, b));
    int sw = t.addNode("nvswitch" + std::to_string(b), NodeKind::kSwitch, b);
    for (int id : g.back()) t.connect(id, sw, 125, kSwitchLat, LinkKind::kNvswitch);
  }
  if (boxes == 2)
    for (int a = 0; a < 2; ++a)
      for (int s = 1; s < 16; s += 2)
        t.addLink(g[static_cast<size_t>(a)][static_cast<size_t>(s)],
                  g[static_cast<size_t>(1 - a)][static_cast<size_t>(s - 1)], 12.5, kIbLat * 2,
                  LinkKind::kInfiniband);
  return t;
}

// Two-level fat tree: boxes of `gpus` GPUs on an NVSwitch (300), each GPU's
// NIC (25) on its box's leaf switch; every leaf reaches each of 2 spines
// with gpus x 25 / (2 x oversubscription).
Topology fatTree(int boxes, int gpus, double oversub) {
  Topology t;
  t.memoryBandwidth = 1500;
  const int spines = 2;
  std::vector<int> spine;
  for (int s = 0; s < spines; ++s)
    spine.push_back(t.addNode("spine" + std::to_string(s), NodeKind::kSwitch));
  for (int b = 0; b < boxes; ++b) {
    auto g = addRanks(t, gpus, b);
    int sw = t.addNode("nvswitch" + std::to_string(b), NodeKind::kSwitch, b);
    int leaf = t.addNode("leaf" + std::to_string(b), NodeKind::kSwitch, b);
    for (int i = 0; i < gpus; ++i) {
      t.connect(g[static_cast<size_t>(i)], sw, 300, kSwitchLat, LinkKind::kNvswitch);
      int n = t.addNode("nic" + std::to_string(b * gpus + i), NodeKind::kNic, b);
      t.connect(g[static_cast<size_t>(i)], n, 25, kPcieLat, LinkKind::kPcie);
      t.connect(n, leaf, 25, kIbLat, LinkKind::kInfiniband);
    }
    for (int s : spine)
      t.connect(leaf, s, gpus * 25.0 / (spines * oversub), kIbLat, LinkKind::kInfiniband);
  }
  return t;
}

bool toNumber(const std::string& s, double* out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

}  // namespace

const std::vector<PresetInfo>& presets() {
  static const std::vector<PresetInfo> all = {
      {"ring", ":N[:GBPS]", "bidirectional ring of N ranks (25 GB/s per direction)"},
      {"torus", ":K[:GBPS]", "K x K 2D torus (25 GB/s per direction)"},
      {"full", ":N[:GBPS]", "N ranks, every pair linked (25 GB/s per direction)"},
      {"gpu", ":N[:GBPS]",
       "N ranks on one GPU whose copy bandwidth (read + write) is GBPS (default 4150: H200)"},
      {"dgx1", "", "DGX-1: 8 V100, NVLink2 hybrid cube-mesh, 25 GB/s per link"},
      {"ndv2", "[:BOXES]",
       "Azure NDv2: DGX-1 boxes; two boxes joined by one 12.5 GB/s arc each way"},
      {"dgx2", "[:BOXES]",
       "DGX-2: 16 V100 on NVSwitch (125); two boxes by 8 arcs of 12.5 each way"},
      {"dgx-a100", "[:BOXES]",
       "DGX A100: 8 GPUs on NVSwitch (300); boxes by a 25 GB/s NIC per GPU on one IB fabric"},
      {"ndv4", "[:BOXES]", "Azure NDv4: the DGX A100 shape"},
      {"dgx-h100", "[:BOXES]",
       "DGX H100: 8 GPUs on NVSwitch (450); boxes by a 50 GB/s NIC per GPU, NIC g on rail g"},
      {"ndv5", "[:BOXES]", "Azure NDv5: the DGX H100 shape"},
      {"mi250", "[:BOXES]", "AMD MI250 box: 16 GCDs, xGMI 50 per link; boxes by 16 GB/s NICs"},
      {"fattree", ":BOXES[:GPUS[:OVERSUB]]",
       "boxes of GPUs (NVSwitch 300, 25 GB/s NICs) under leaf and 2 spine switches"},
  };
  return all;
}

Result<Topology> makePreset(const std::string& spec) {
  std::string head = spec, list;
  if (size_t at = spec.find('@'); at != std::string::npos) {
    head = spec.substr(0, at);
    list = spec.substr(at + 1);
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t colon = head.find(':', start);
    parts.push_back(head.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  // "dgx-a100x2" is "dgx-a100:2" (the names papers use).
  static const char* kBoxed[] = {"ndv2", "dgx2", "dgx-a100", "ndv4", "dgx-h100", "ndv5", "mi250"};
  if (size_t x = parts[0].rfind('x');
      parts.size() == 1 && x != std::string::npos && x + 1 < parts[0].size() &&
      parts[0].find_first_not_of("0123456789", x + 1) == std::string::npos &&
      std::find(std::begin(kBoxed), std::end(kBoxed), parts[0].substr(0, x)) != std::end(kBoxed)) {
    parts.push_back(parts[0].substr(x + 1));
    parts[0].resize(x);
  }
  const std::string& name = parts[0];
  std::vector<double> args;
  for (size_t i = 1; i < parts.size(); ++i) {
    double v = 0;
    if (!toNumber(parts[i], &v) || !(v > 0))
      return invalidArgument("topology '" + spec + "': '" + parts[i] +
                             "' is not a positive number");
    args.push_back(v);
  }
  auto arg = [&](size_t i, double fallback) { return i < args.size() ? args[i] : fallback; };
  auto count = [&](size_t i, double fallback) { return static_cast<int>(arg(i, fallback)); };
  auto needs = [&](size_t most, bool first) -> Status {
    if (args.size() > most) return invalidArgument("topology '" + spec + "': too many arguments");
    if (first && args.empty())
      return invalidArgument("topology '" + spec + "': say how many (" + name + ":N)");
    return Status::ok();
  };
  Result<Topology> made = invalidArgument("unknown topology '" + name + "' (chorus topo list)");
  if (name == "ring" || name == "full" || name == "torus") {
    CHORUS_RETURN_IF_ERROR(needs(2, true));
    int n = count(0, 0);
    if (n < 1 || n > (name == "torus" ? 64 : 4096))
      return invalidArgument("topology '" + spec + "': size out of range");
    double bw = arg(1, 25);
    made = name == "ring" ? ring(n, bw) : name == "full" ? full(n, bw) : torus(n, bw);
  } else if (name == "gpu") {
    CHORUS_RETURN_IF_ERROR(needs(2, true));
    int n = count(0, 0);
    if (n < 1 || n > 1024) return invalidArgument("topology '" + spec + "': size out of range");
    made = oneGpu(n, arg(1, 4150));
  } else if (name == "dgx1") {
    CHORUS_RETURN_IF_ERROR(needs(0, false));
    made = dgx1(1, false);
  } else if (name == "ndv2" || name == "dgx2") {
    CHORUS_RETURN_IF_ERROR(needs(1, false));
    int boxes = count(0, 1);
    if (boxes != 1 && boxes != 2)
      return invalidArgument("topology '" + spec + "': " + name + " is modelled for 1 or 2 boxes");
    made = name == "ndv2" ? dgx1(boxes, true) : dgx2(boxes);
  } else if (name == "dgx-a100" || name == "ndv4" || name == "dgx-h100" || name == "ndv5" ||
             name == "mi250") {
    CHORUS_RETURN_IF_ERROR(needs(1, false));
    int boxes = count(0, 1);
    if (boxes < 1 || boxes > 512) return invalidArgument("topology '" + spec + "': 1 to 512 boxes");
    bool h100 = name == "dgx-h100" || name == "ndv5";
    made = name == "mi250" ? mi250(boxes)
           : h100          ? switched(boxes, 8, 450, 50, true, 3350)
                           : switched(boxes, 8, 300, 25, false, 1555);
  } else if (name == "fattree") {
    CHORUS_RETURN_IF_ERROR(needs(3, true));
    int boxes = count(0, 0), gpus = count(1, 8);
    if (boxes < 1 || boxes > 512 || gpus < 1 || gpus > 64)
      return invalidArgument("topology '" + spec + "': 1 to 512 boxes of 1 to 64 GPUs");
    made = fatTree(boxes, gpus, arg(2, 1));
  }
  if (!made.isOk()) return made;
  Topology t = std::move(made).value();
  t.name = head;
  if (list.empty()) return t;
  std::vector<int> keep;
  for (size_t start = 0;;) {
    size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma - start);
    double v = -1;
    if (!toNumber(item, &v) || v < 0 || v != static_cast<int>(v))
      return invalidArgument("topology '" + spec + "': '" + item + "' is not a rank");
    keep.push_back(static_cast<int>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return t.subset(keep);
}

Result<Topology> loadTopology(const std::string& nameOrFile) {
  if (nameOrFile.size() > 5 && nameOrFile.compare(nameOrFile.size() - 5, 5, ".json") == 0)
    return readTopologyFile(nameOrFile);
  // NCCL's topology XML: FILE.xml or FILE.xml:BOXES.
  if (size_t at = nameOrFile.rfind(".xml"); at != std::string::npos) {
    std::string path = nameOrFile.substr(0, at + 4), rest = nameOrFile.substr(at + 4);
    double boxes = 1;
    if (!rest.empty() && (rest[0] != ':' || !toNumber(rest.substr(1), &boxes) || boxes < 1 ||
                          boxes != static_cast<int>(boxes)))
      return invalidArgument("topology '" + nameOrFile + "': FILE.xml or FILE.xml:BOXES");
    if (rest.empty() || rest[0] == ':') return readNcclTopologyFile(path, static_cast<int>(boxes));
  }
  return makePreset(nameOrFile);
}

}  // namespace chorus::topo
