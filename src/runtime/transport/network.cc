#include "runtime/transport/network.h"

#include <algorithm>

namespace chorus::runtime {
namespace {

// The row that links `peer`: the cheapest transport that reaches it, or the
// one `mode` names; an error when that one cannot.
Result<size_t> choose(const std::string& mode, const PeerPlace& peer, int me,
                      const std::vector<std::string>& hosts) {
  std::span<const TransportChoice> table = transports();
  size_t best = table.size();
  for (size_t i = 0; i < table.size(); ++i) {
    const TransportChoice& t = table[i];
    if (mode != "auto" && t.name != mode) continue;
    if (!t.reaches(peer)) {
      if (mode == "auto") continue;
      return Status(StatusCode::kInvalidArgument,
                    "CHORUS_TRANSPORT=" + mode + ", but ranks " + std::to_string(me) + " and " +
                        std::to_string(peer.rank) + " run on " +
                        (peer.sameHost ? "one host (" : "different hosts (") +
                        hosts[static_cast<size_t>(me)] + ", " +
                        hosts[static_cast<size_t>(peer.rank)] + ")");
    }
    if (best == table.size() || t.cost < table[best].cost) best = i;
  }
  if (best == table.size())
    return Status(StatusCode::kInternal, "no transport reaches rank " + std::to_string(peer.rank));
  return best;
}

}  // namespace

void PollerSet::enter() {
  for (Poller* p : pollers_) p->enter();
}

bool PollerSet::poll() {
  bool moved = false;
  for (Poller* p : pollers_) moved = p->poll() || moved;
  return moved;
}

void PollerSet::leave(bool sleeping) {
  for (Poller* p : pollers_) p->leave(sleeping);
}

Result<std::unique_ptr<Network>> Network::create(
    Bootstrap& boot, const std::string& prefix, const NetworkOptions& options,
    std::function<void(int, const std::string&)> onLoss) {
  std::span<const TransportChoice> table = transports();
  const std::string& mode = options.transport;
  bool known = mode == "auto";
  std::string names;
  for (const TransportChoice& t : table) {
    known = known || t.name == mode;
    (names += names.empty() ? "" : ", ") += t.name;
  }
  if (!known)
    return Status(StatusCode::kInvalidArgument,
                  "CHORUS_TRANSPORT='" + mode + "' is not auto, " + names);
  std::unique_ptr<Network> net(new Network());
  const int n = boot.nranks();
  const int me = net->me_ = boot.rank();
  const auto& hosts = boot.hosts();
  auto sameHost = [&](int a, int b) {
    return hosts[static_cast<size_t>(a)] == hosts[static_cast<size_t>(b)];
  };
  // Every pair's link, as both of its ends see it: a transport some pair of
  // the job uses is made on every rank (its creation may be collective).
  std::vector<bool> used(table.size(), false);
  net->links_.assign(static_cast<size_t>(n), 0);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      // A rank reaches itself as it would a peer on its host, whatever is
      // forced.
      auto k = choose(a == b ? "auto" : mode, PeerPlace{b, sameHost(a, b)}, a, hosts);
      if (!k.isOk()) return k.status();
      if (a != b || a == me) used[k.value()] = true;
      if (a == me) net->links_[static_cast<size_t>(b)] = k.value();
    }
  for (size_t i = 0; i < table.size(); ++i)
    if (used[i]) net->jobUses_.push_back(table[i].name);
  // Doorbells: each rank's in a segment of its own, mapped by the peers
  // whose transport rings it (shared memory's, on this host).
  std::vector<bool> unmapped(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    unmapped[static_cast<size_t>(r)] = !table[net->links_[static_cast<size_t>(r)]].peerBells;
  auto bells = RankBells::create(prefix, me, n, boot, unmapped, options.crossMemoryAttach);
  if (!bells.isOk()) return bells.status();
  net->bells_ = std::move(bells).value();
  // The transports, in table order on every rank.
  net->made_.resize(table.size());
  std::vector<Poller*> pollers;
  for (size_t i = 0; i < table.size(); ++i) {
    if (!used[i]) continue;
    std::vector<bool> linked(static_cast<size_t>(n), false);
    for (int r = 0; r < n; ++r)
      linked[static_cast<size_t>(r)] = r != me && net->links_[static_cast<size_t>(r)] == i;
    TransportContext context{boot, linked, *net->bells_, options, onLoss};
    auto t = table[i].create(context);
    if (!t.isOk()) return t.status();
    net->made_[i] = std::move(t).value();
    if (Poller* p = net->made_[i]->poller()) pollers.push_back(p);
  }
  if (pollers.size() == 1) {
    net->poller_ = pollers.front();
  } else if (pollers.size() > 1) {
    net->pollerSet_ = std::make_unique<PollerSet>(std::move(pollers));
    net->poller_ = net->pollerSet_.get();
  }
  return net;
}

Network::~Network() { shutdown(); }

bool Network::allPairsUse(std::string_view name) const {
  return jobUses_.size() == 1 && jobUses_.front() == name;
}

void Network::interrupt() {
  if (bells_ != nullptr) bells_->bell(me_).ring();
  for (auto& t : made_)
    if (t != nullptr) t->interrupt();
}

void Network::shutdown() {
  for (auto& t : made_)
    if (t != nullptr) t->shutdown();
}

std::string Network::describe(const std::string& host) const {
  std::string line = "rank " + std::to_string(me_) + " (" + host + "):";
  std::span<const TransportChoice> table = transports();
  for (size_t i = 0; i < table.size(); ++i) {
    std::string peers;
    for (int r = 0; r < size(); ++r)
      if (r != me_ && transportIndex(r) == i) (peers += ' ') += std::to_string(r);
    if (i > 0) line += ';';
    ((line += ' ') += table[i].peersAs) += peers.empty() ? " -" : peers;
  }
  return line + (bells_->crossMemoryAttach() ? "; single copies by cross-memory attach"
                                             : "; copies through rings");
}

}  // namespace chorus::runtime
