// The network seam: how one rank of a multi-process communicator reaches
// each peer. Made once, collectively, from the bootstrap: every transport in
// the table (transports()) says whether it can reach a peer and at what
// cost, and the cheapest that can is that peer's link. What a fabric then
// builds per connection (a ring in a shared segment, a TCP stream) follows
// the peer's link kind; what the executor polls (Poller) and sleeps on
// (the rank's doorbell) is the network's, apart from how connections are
// set up.
//
// Today's transports: shared memory (same host; CHORUS_CMA single copies)
// and TCP (anywhere). CHORUS_TRANSPORT names one of them to force it for
// every peer, or "auto" (the cheapest that reaches). docs/architecture.md
// says what a new transport touches.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/transport/process_fabric.h"
#include "runtime/transport/tcp_transport.h"

namespace chorus::runtime {

enum class LinkKind { kSelf, kSharedMemory, kTcp };

// Where a peer is, as a transport decides whether it reaches it.
struct PeerPlace {
  int rank = 0;
  bool sameHost = false;
};

// One row of the transport table.
struct TransportChoice {
  LinkKind kind;
  std::string_view name;  // what CHORUS_TRANSPORT calls it
  int cost;               // lower wins among those that reach a peer
  bool (*reaches)(const PeerPlace& peer);
};
std::span<const TransportChoice> transports();

struct NetworkOptions {
  // CHORUS_TRANSPORT: "auto", or a transport's name for every peer.
  std::string transport = "auto";
  bool crossMemoryAttach = true;  // CHORUS_CMA
  std::string tcpSockets;         // CHORUS_TCP_SOCKETS as given ("": the default)
  int timeoutMs = 300000;         // connection setup
};

class Network {
 public:
  // Collective over every rank of `boot`: checks that every rank passes the
  // same transport setting, picks each peer's link, maps the doorbells of
  // the peers on this host (RankBells, segments named from `prefix`) and,
  // when any pair of the job talks TCP, makes the TCP links. `onLoss` is
  // called (from a progress thread) when a TCP peer is lost.
  // kInvalidArgument for a setting no peer can honour (naming the ranks).
  static Result<std::unique_ptr<Network>> create(
      Bootstrap& boot, const std::string& prefix, const NetworkOptions& options,
      std::function<void(int, const std::string&)> onLoss);
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  int me() const { return me_; }
  int size() const { return static_cast<int>(kinds_.size()); }
  LinkKind kind(int peer) const { return kinds_[static_cast<size_t>(peer)]; }
  // No pair of the job (not only this rank's) talks anything but shared
  // memory: what selection calls a shared-memory world.
  bool allSharedMemory() const { return allShared_; }
  RankBells& bells() { return *bells_; }
  TcpLinks* tcp() const { return tcp_.get(); }  // null when no pair talks TCP
  // What a blocked rank polls besides its doorbell (null: nothing).
  Poller* poller() const { return tcp_.get(); }
  // Wakes this rank wherever it sleeps (its doorbell, its sockets); safe
  // from any thread.
  void interrupt();
  // Stops progress threads and says goodbye on every link; idempotent.
  // Before the bootstrap goes.
  void shutdown();
  // One line: which peers each link kind reaches, and how shared memory
  // copies.
  std::string describe(const std::string& host) const;

 private:
  Network() = default;
  int me_ = 0;
  std::vector<LinkKind> kinds_;
  bool allShared_ = true;
  std::unique_ptr<RankBells> bells_;
  std::unique_ptr<TcpLinks> tcp_;
};

}  // namespace chorus::runtime
