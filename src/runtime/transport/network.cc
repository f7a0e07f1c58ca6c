#include "runtime/transport/network.h"

#include <cstdlib>
#include <limits>

namespace chorus::runtime {
namespace {

constexpr TransportChoice kTransports[] = {
    {LinkKind::kSharedMemory, "shm", 1, [](const PeerPlace& p) { return p.sameHost; }},
    {LinkKind::kTcp, "tcp", 10, [](const PeerPlace&) { return true; }},
};

// The link to `peer`: the cheapest transport that reaches it, or the one
// `mode` names; an error when that one cannot.
Result<LinkKind> choose(const std::string& mode, const PeerPlace& peer, int me,
                        const std::vector<std::string>& hosts) {
  const TransportChoice* best = nullptr;
  for (const TransportChoice& t : kTransports) {
    if (mode != "auto" && t.name != mode) continue;
    if (!t.reaches(peer)) {
      if (mode == "auto") continue;
      return Status(StatusCode::kInvalidArgument,
                    "CHORUS_TRANSPORT=" + mode + ", but ranks " + std::to_string(me) + " and " +
                        std::to_string(peer.rank) + " run on different hosts (" +
                        hosts[static_cast<size_t>(me)] + ", " +
                        hosts[static_cast<size_t>(peer.rank)] + ")");
    }
    if (best == nullptr || t.cost < best->cost) best = &t;
  }
  if (best == nullptr)
    return Status(StatusCode::kInternal, "no transport reaches rank " + std::to_string(peer.rank));
  return best->kind;
}

}  // namespace

std::span<const TransportChoice> transports() { return kTransports; }

Result<std::unique_ptr<Network>> Network::create(
    Bootstrap& boot, const std::string& prefix, const NetworkOptions& options,
    std::function<void(int, const std::string&)> onLoss) {
  const std::string& mode = options.transport;
  bool known = mode == "auto";
  std::string names;
  for (const TransportChoice& t : kTransports) {
    known = known || t.name == mode;
    (names += names.empty() ? "" : ", ") += t.name;
  }
  if (!known)
    return Status(StatusCode::kInvalidArgument,
                  "CHORUS_TRANSPORT='" + mode + "' is not auto, " + names);
  std::unique_ptr<Network> net(new Network());
  const int n = boot.nranks();
  net->me_ = boot.rank();
  // Every pair's link, as both of its ends see it (a job with any TCP pair
  // makes TCP links on every rank: their creation is collective).
  const auto& hosts = boot.hosts();
  net->kinds_.assign(static_cast<size_t>(n), LinkKind::kSelf);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      PeerPlace peer{b, hosts[static_cast<size_t>(a)] == hosts[static_cast<size_t>(b)]};
      auto k = choose(mode, peer, a, hosts);
      if (!k.isOk()) return k.status();
      if (k.value() != LinkKind::kSharedMemory) net->allShared_ = false;
      if (a == net->me_) net->kinds_[static_cast<size_t>(b)] = k.value();
    }
  std::vector<bool> overTcp(static_cast<size_t>(n), false);
  for (int r = 0; r < n; ++r) overTcp[static_cast<size_t>(r)] = net->kind(r) == LinkKind::kTcp;
  // Doorbells: each rank's in a segment of its own, mapped by its peers on
  // this host (the others are reached over TCP).
  auto bells = RankBells::create(prefix, net->me_, n, boot, overTcp, options.crossMemoryAttach);
  if (!bells.isOk()) return bells.status();
  net->bells_ = std::move(bells).value();
  if (!net->allShared_) {  // collective: every rank of the job takes part
    TcpOptions to;
    to.timeoutMs = options.timeoutMs;
    if (const std::string& k = options.tcpSockets; !k.empty()) {
      char* end = nullptr;
      long v = std::strtol(k.c_str(), &end, 10);
      if (end == k.c_str() || *end != '\0' || v < 1 || v > 16)
        return Status(StatusCode::kInvalidArgument,
                      "CHORUS_TCP_SOCKETS='" + k + "' is not a number in [1, 16]");
      to.socketsPerPeer = static_cast<int>(v);
    }
    auto tcp = TcpLinks::create(boot, boot.secret(), overTcp, net->bells_->bell(net->me_), to,
                                std::move(onLoss));
    if (!tcp.isOk()) return tcp.status();
    net->tcp_ = std::move(tcp).value();
  }
  return net;
}

Network::~Network() { shutdown(); }

void Network::interrupt() {
  if (bells_ != nullptr) bells_->bell(me_).ring();
  if (tcp_ != nullptr) tcp_->interrupt();
}

void Network::shutdown() {
  if (tcp_ != nullptr) tcp_->shutdown();
}

std::string Network::describe(const std::string& host) const {
  std::string shm, tcp;
  for (int r = 0; r < size(); ++r) {
    if (kind(r) == LinkKind::kSharedMemory) (shm += ' ') += std::to_string(r);
    if (kind(r) == LinkKind::kTcp) (tcp += ' ') += std::to_string(r);
  }
  return "rank " + std::to_string(me_) + " (" + host + "): shared memory with ranks" +
         (shm.empty() ? " -" : shm) + "; TCP to ranks" + (tcp.empty() ? " -" : tcp) +
         (bells_->crossMemoryAttach() ? "; single copies by cross-memory attach"
                                      : "; copies through rings");
}

}  // namespace chorus::runtime
