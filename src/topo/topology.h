// The topology model (docs/topology.md): a directed graph of compute ranks,
// switches and NICs joined by links with a bandwidth per direction, a
// latency and a kind. The simulator routes every transfer over it and the
// synthesizer reads its capacities. Presets (presets.cc) build the machines
// of docs/spec/TOPOLOGIES.md; JSON (json.cc) reads and writes any graph.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace chorus::topo {

// One microsecond in seconds (link latencies are in seconds).
inline constexpr double kUs = 1e-6;

enum class NodeKind { kRank, kSwitch, kNic };
enum class LinkKind { kNvlink, kNvswitch, kXgmi, kPcie, kInfiniband, kEthernet, kGeneric };

const char* nodeKindName(NodeKind k);
const char* linkKindName(LinkKind k);
bool parseNodeKind(const std::string& s, NodeKind* out);
bool parseLinkKind(const std::string& s, LinkKind* out);

struct Node {
  std::string name;
  NodeKind kind = NodeKind::kRank;
  int rank = -1;  // ranks: 0..ranks-1
  int box = 0;    // the machine it is in (multi-node systems)
  // Ranks: the most the rank sends / receives per second over all its
  // links together (GB/s; 0 = only its links limit it), e.g. a GPU whose
  // copy engines cannot feed NVLink and its NIC at full speed at once.
  double sendCap = 0, recvCap = 0;
};

// One direction of a connection. Parallel links of docs/spec/TOPOLOGIES.md ("a-b x2")
// are one link with their summed bandwidth.
struct Link {
  int from = -1, to = -1;  // node ids
  double bandwidth = 0;    // GB/s (1e9 bytes per second) in this direction
  double latency = 0;      // seconds
  LinkKind kind = LinkKind::kGeneric;
};

class Topology {
 public:
  std::string name;
  std::vector<Node> nodes;
  std::vector<Link> links;
  // What a rank's own memory moves per second for local copies and
  // reductions (GB/s; 0 = free, as in bandwidth-only models).
  double memoryBandwidth = 0;

  int addNode(std::string nodeName, NodeKind kind, int box = 0);
  int addRank(int box = 0);  // named "gpu<rank>"
  // A link each way with the same bandwidth and latency.
  void connect(int a, int b, double gbps, double latencySeconds, LinkKind kind);
  void addLink(int from, int to, double gbps, double latencySeconds, LinkKind kind);
  // Changes a link's bandwidth (routes are chosen by it, so they are
  // recomputed).
  void setBandwidth(int link, double gbps);

  int ranks() const { return static_cast<int>(rankNodes_.size()); }
  int nodeOfRank(int rank) const { return rankNodes_[static_cast<size_t>(rank)]; }
  int findNode(const std::string& nodeName) const;  // -1 if absent

  // The links a transfer from rank `a` to rank `b` crosses: fewest hops,
  // then the widest bottleneck; where several ways into a node tie, source
  // a takes the (a mod n)-th of the n (in the order the search meets
  // them), so sources spread over equal paths as ECMP spreads flows (a fat
  // tree's spines). Ranks forward only where no path through switches and
  // NICs alone exists. Empty when `b` cannot be reached. Cached per pair
  // (one search per source): the first call for a pair writes the cache.
  const std::vector<int>& route(int a, int b) const;
  // Asks for every pair's route, so threads may read them from then on
  // (route() writes the cache only for a pair not asked for before).
  void routeEveryPair() const;

  // Structural checks: names unique, ranks numbered 0..n-1, links between
  // existing nodes with positive bandwidth and non-negative latency.
  Status validate() const;

  // Keeps the ranks `keep` (renumbered 0.. in that order) and every node
  // that is not a rank, and the links among what is kept.
  Result<Topology> subset(const std::vector<int>& keep) const;

 private:
  std::vector<int> rankNodes_;
  // Per source rank: the link that reaches each node on its way (computed
  // on first use); the routes asked for, built from it.
  mutable std::vector<std::vector<int>> via_;
  mutable std::map<std::pair<int, int>, std::vector<int>> routes_;
  // routesFrom's search: each node's outgoing links (CSR, for `links` as
  // it was), and buffers kept between sources.
  struct Search {
    size_t links = 0;
    std::vector<int> outStart, out;
    std::vector<int> dist, from, queue;
    std::vector<double> widest;
    std::vector<std::vector<int>> equal;
    std::vector<bool> reached;
  };
  mutable Search search_;
  void routesFrom(int a) const;
};

}  // namespace chorus::topo
