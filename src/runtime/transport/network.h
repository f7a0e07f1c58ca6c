// The network seam: how one rank of a multi-process communicator reaches
// each peer. Made once, collectively, from the bootstrap: every transport in
// the table (transports(), runtime/transport/registry.cc) says whether it
// can reach a peer and at what cost, and the cheapest that can is that
// peer's link. The network makes each transport some pair of the job uses
// (runtime/transport/peer_transport.h); a fabric then asks the peer's
// transport for each connection. What the executor polls (poller()) and
// sleeps on (the rank's doorbell) is the network's, apart from how
// connections are set up.
//
// CHORUS_TRANSPORT names one transport to force it for every peer, or
// "auto" (the cheapest that reaches). docs/architecture.md says what a new
// transport touches.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/transport/bells.h"
#include "runtime/transport/peer_transport.h"

namespace chorus::runtime {

// The registered transports, in table order.
std::span<const TransportChoice> transports();

// Several transports' pollers as one: a waiting rank drives them all, and
// sleeps on its doorbell (none of them serves every peer).
class PollerSet final : public Poller {
 public:
  explicit PollerSet(std::vector<Poller*> pollers) : pollers_(std::move(pollers)) {}
  void enter() override;
  bool poll() override;
  void leave(bool sleeping) override;

 private:
  std::vector<Poller*> pollers_;
};

class Network {
 public:
  // Collective over every rank of `boot`: checks that every rank passes the
  // same transport setting, picks each peer's link, maps the doorbells of
  // the peers on this host (RankBells, segments named from `prefix`) and
  // makes every transport any pair of the job uses. `onLoss` is called
  // (from a progress thread) when a peer is lost.
  // kInvalidArgument for a setting no peer can honour (naming the ranks).
  static Result<std::unique_ptr<Network>> create(
      Bootstrap& boot, const std::string& prefix, const NetworkOptions& options,
      std::function<void(int, const std::string&)> onLoss);
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  int me() const { return me_; }
  int size() const { return static_cast<int>(links_.size()); }
  // The row of transports() that links `peer` (this rank itself: the
  // cheapest that reaches a rank on this host).
  size_t transportIndex(int peer) const { return links_[static_cast<size_t>(peer)]; }
  size_t transportCount() const { return made_.size(); }
  const TransportChoice& link(int peer) const { return transports()[transportIndex(peer)]; }
  PeerTransport& transport(int peer) const { return *made_[transportIndex(peer)]; }
  // Every pair of the job (not only this rank's) is linked by the transport
  // called `name`: e.g. what selection calls a shared-memory world.
  bool allPairsUse(std::string_view name) const;
  RankBells& bells() { return *bells_; }
  // What a blocked rank polls besides its doorbell (null: nothing).
  Poller* poller() const { return poller_; }
  // Wakes this rank wherever it sleeps (its doorbell, its transports); safe
  // from any thread.
  void interrupt();
  // Stops progress threads and says goodbye on every link; idempotent.
  // Before the bootstrap goes.
  void shutdown();
  // One line: which peers each transport links, and how shared memory
  // copies.
  std::string describe(const std::string& host) const;

 private:
  Network() = default;
  int me_ = 0;
  std::vector<size_t> links_;              // peer -> row of transports()
  std::vector<std::string_view> jobUses_;  // transports some pair of the job uses
  std::unique_ptr<RankBells> bells_;
  std::vector<std::unique_ptr<PeerTransport>> made_;  // by row; null where unused
  std::unique_ptr<PollerSet> pollerSet_;
  Poller* poller_ = nullptr;
};

}  // namespace chorus::runtime
