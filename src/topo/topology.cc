#include "topo/topology.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "core/check.h"

namespace chorus::topo {

namespace {
constexpr const char* kNodeKinds[] = {"rank", "switch", "nic"};
constexpr const char* kLinkKinds[] = {"nvlink",     "nvswitch", "xgmi",   "pcie",
                                      "infiniband", "ethernet", "generic"};
}  // namespace

const char* nodeKindName(NodeKind k) { return kNodeKinds[static_cast<int>(k)]; }
const char* linkKindName(LinkKind k) { return kLinkKinds[static_cast<int>(k)]; }

bool parseNodeKind(const std::string& s, NodeKind* out) {
  for (int i = 0; i < 3; ++i)
    if (s == kNodeKinds[i]) {
      *out = static_cast<NodeKind>(i);
      return true;
    }
  return false;
}

bool parseLinkKind(const std::string& s, LinkKind* out) {
  for (int i = 0; i < 7; ++i)
    if (s == kLinkKinds[i]) {
      *out = static_cast<LinkKind>(i);
      return true;
    }
  return false;
}

int Topology::addNode(std::string nodeName, NodeKind kind, int box) {
  Node n;
  n.name = std::move(nodeName);
  n.kind = kind;
  n.box = box;
  if (kind == NodeKind::kRank) {
    n.rank = static_cast<int>(rankNodes_.size());
    rankNodes_.push_back(static_cast<int>(nodes.size()));
  }
  nodes.push_back(std::move(n));
  routes_.clear();
  via_.clear();
  return static_cast<int>(nodes.size()) - 1;
}

void Topology::setBandwidth(int link, double gbps) {
  CHORUS_CHECK(link >= 0 && static_cast<size_t>(link) < links.size(), "no such link");
  links[static_cast<size_t>(link)].bandwidth = gbps;
  routes_.clear();
  via_.clear();
}

int Topology::addRank(int box) {
  return addNode("gpu" + std::to_string(rankNodes_.size()), NodeKind::kRank, box);
}

void Topology::addLink(int from, int to, double gbps, double latencySeconds, LinkKind kind) {
  links.push_back(Link{from, to, gbps, latencySeconds, kind});
  routes_.clear();
  via_.clear();
}

void Topology::connect(int a, int b, double gbps, double latencySeconds, LinkKind kind) {
  addLink(a, b, gbps, latencySeconds, kind);
  addLink(b, a, gbps, latencySeconds, kind);
}

int Topology::findNode(const std::string& nodeName) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == nodeName) return static_cast<int>(i);
  return -1;
}

Status Topology::validate() const {
  std::set<std::string> names;
  int rank = 0;
  for (const Node& n : nodes) {
    if (n.name.empty()) return Status(StatusCode::kInvalidArgument, "a node has no name");
    if (!names.insert(n.name).second)
      return Status(StatusCode::kInvalidArgument, "two nodes are named '" + n.name + "'");
    if (n.kind == NodeKind::kRank && n.rank != rank++)
      return Status(StatusCode::kInvalidArgument,
                    "ranks must be numbered 0.. in node order ('" + n.name + "')");
    if (!(n.sendCap >= 0) || !(n.recvCap >= 0))
      return Status(StatusCode::kInvalidArgument, "node '" + n.name + "' has a negative cap");
    if (n.kind != NodeKind::kRank && (n.sendCap > 0 || n.recvCap > 0))
      return Status(StatusCode::kInvalidArgument,
                    "node '" + n.name + "' has a send/receive cap but is not a rank");
  }
  if (rankNodes_.empty()) return Status(StatusCode::kInvalidArgument, "the topology has no ranks");
  const int count = static_cast<int>(nodes.size());
  for (size_t i = 0; i < links.size(); ++i) {
    const Link& l = links[i];
    std::string which = "link " + std::to_string(i);
    if (l.from < 0 || l.from >= count || l.to < 0 || l.to >= count)
      return Status(StatusCode::kInvalidArgument, which + " joins a node that does not exist");
    if (l.from == l.to) return Status(StatusCode::kInvalidArgument, which + " is a loop");
    // Finite too: an NCCL file's "speed" past double's range read as inf,
    // which JSON cannot hold (found by fuzz_topology).
    if (!(l.bandwidth > 0) || !std::isfinite(l.bandwidth))
      return Status(StatusCode::kInvalidArgument, which + " needs a finite bandwidth above 0");
    if (!(l.latency >= 0) || !std::isfinite(l.latency))
      return Status(StatusCode::kInvalidArgument, which + " needs a finite latency >= 0");
  }
  return Status::ok();
}

void Topology::routesFrom(int a) const {
  const size_t count = nodes.size();
  if (via_.empty()) via_.assign(rankNodes_.size(), {});
  std::vector<int>& via = via_[static_cast<size_t>(a)];
  via.assign(count, -1);
  Search& s = search_;
  if (s.outStart.size() != count + 1 || s.links != links.size()) {
    s.links = links.size();
    s.outStart.assign(count + 1, 0);
    for (const Link& l : links) ++s.outStart[static_cast<size_t>(l.from) + 1];
    for (size_t v = 0; v < count; ++v) s.outStart[v + 1] += s.outStart[v];
    s.out.resize(links.size());
    std::vector<int> fill(s.outStart.begin(), s.outStart.end() - 1);
    for (size_t i = 0; i < links.size(); ++i)
      s.out[static_cast<size_t>(fill[static_cast<size_t>(links[i].from)]++)] = static_cast<int>(i);
    s.equal.resize(count);
  }
  const int source = nodeOfRank(a);
  // Breadth first; ranks forward only in the second pass, for the targets
  // the first could not reach.
  s.reached.assign(count, false);
  for (bool ranksForward : {false, true}) {
    s.dist.assign(count, -1);
    s.from.assign(count, -1);
    s.widest.assign(count, 0);
    // Ways into a node as short and as wide as its best: the source takes
    // the (a mod n)-th, so sources spread over equal paths (a fat tree's
    // spines) as ECMP spreads flows, each source keeping one tree.
    for (auto& e : s.equal) e.clear();
    s.queue.assign(1, source);
    s.dist[static_cast<size_t>(source)] = 0;
    s.widest[static_cast<size_t>(source)] = std::numeric_limits<double>::infinity();
    for (size_t head = 0; head < s.queue.size(); ++head) {
      const int u = s.queue[head];
      const auto ui = static_cast<size_t>(u);
      if (u != source && nodes[ui].kind == NodeKind::kRank && !ranksForward) continue;
      for (int k = s.outStart[ui]; k < s.outStart[ui + 1]; ++k) {
        const int li = s.out[static_cast<size_t>(k)];
        const Link& l = links[static_cast<size_t>(li)];
        auto v = static_cast<size_t>(l.to);
        double w = std::min(s.widest[ui], l.bandwidth);
        if (s.dist[v] < 0) {
          s.dist[v] = s.dist[ui] + 1;
          s.widest[v] = w;
          s.equal[v].assign(1, li);
          s.queue.push_back(l.to);
        } else if (s.dist[v] == s.dist[ui] + 1 && w > s.widest[v]) {
          s.widest[v] = w;
          s.equal[v].assign(1, li);
        } else if (s.dist[v] == s.dist[ui] + 1 && w == s.widest[v]) {
          s.equal[v].push_back(li);
        }
      }
    }
    for (size_t v = 0; v < count; ++v)
      if (!s.equal[v].empty()) s.from[v] = s.equal[v][static_cast<size_t>(a) % s.equal[v].size()];
    // A rank target keeps the first pass's way; the second pass fills in
    // the ones it could not reach, and the nodes on their ways.
    for (size_t v = 0; v < count; ++v)
      if (!s.reached[v] && s.from[v] >= 0) {
        via[v] = s.from[v];
        if (!ranksForward) s.reached[v] = true;
      }
    if (!ranksForward) {
      bool all = true;
      for (int r : rankNodes_) all = all && (r == source || s.reached[static_cast<size_t>(r)]);
      if (all) break;
    }
  }
}

void Topology::routeEveryPair() const {
  for (int a = 0; a < ranks(); ++a)
    for (int b = 0; b < ranks(); ++b) (void)route(a, b);
}

const std::vector<int>& Topology::route(int a, int b) const {
  auto key = std::pair{a, b};
  if (auto it = routes_.find(key); it != routes_.end()) return it->second;
  if (via_.empty() || via_[static_cast<size_t>(a)].empty()) routesFrom(a);
  const std::vector<int>& via = via_[static_cast<size_t>(a)];
  std::vector<int> path;
  const int source = nodeOfRank(a);
  int at = nodeOfRank(b);
  if (a != b && via[static_cast<size_t>(at)] >= 0) {
    while (at != source && path.size() <= nodes.size()) {
      int li = via[static_cast<size_t>(at)];
      path.push_back(li);
      at = links[static_cast<size_t>(li)].from;
    }
    std::reverse(path.begin(), path.end());
  }
  return routes_.emplace(key, std::move(path)).first->second;
}

Result<Topology> Topology::subset(const std::vector<int>& keep) const {
  std::vector<int> newId(nodes.size(), -1);
  Topology t;
  t.name = name + "@";
  t.memoryBandwidth = memoryBandwidth;
  std::vector<bool> taken(rankNodes_.size(), false);
  for (size_t i = 0; i < keep.size(); ++i) {
    int r = keep[i];
    if (r < 0 || r >= ranks())
      return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(r) + " is not in " +
                                                      name + " (" + std::to_string(ranks()) +
                                                      " ranks)");
    if (taken[static_cast<size_t>(r)])
      return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(r) + " listed twice");
    taken[static_cast<size_t>(r)] = true;
    if (i > 0) t.name += ",";
    t.name += std::to_string(r);
    const Node& n = nodes[static_cast<size_t>(nodeOfRank(r))];
    int id = t.addNode(n.name, NodeKind::kRank, n.box);
    t.nodes[static_cast<size_t>(id)].sendCap = n.sendCap;
    t.nodes[static_cast<size_t>(id)].recvCap = n.recvCap;
    newId[static_cast<size_t>(nodeOfRank(r))] = id;
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind != NodeKind::kRank)
      newId[i] = t.addNode(nodes[i].name, nodes[i].kind, nodes[i].box);
  for (const Link& l : links) {
    int a = newId[static_cast<size_t>(l.from)], b = newId[static_cast<size_t>(l.to)];
    if (a >= 0 && b >= 0) t.addLink(a, b, l.bandwidth, l.latency, l.kind);
  }
  return t;
}

}  // namespace chorus::topo
