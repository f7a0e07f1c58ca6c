// What a transport of the network seam (runtime/transport/network.h)
// implements. The Network makes a transport once per multi-process
// communicator, on every rank, when any pair of the job uses it (its
// creation may be collective), then asks it, fabric by fabric, for this
// rank's end of each connection to the peers it links. What the executor
// polls while it waits (poller) is the transport's; how connections are set
// up is not the executor's concern.
//
// Adding a transport: its own files, implementing PeerTransport and
// FabricLinks, plus one row in the table of runtime/transport/registry.cc
// (docs/architecture.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/transport/transport.h"

namespace chorus::runtime {

class RankBells;  // runtime/transport/process_fabric.h

// Where a peer is, as a transport decides whether it reaches it.
struct PeerPlace {
  int rank = 0;
  bool sameHost = false;
};

struct NetworkOptions {
  // CHORUS_TRANSPORT: "auto", or a transport's name for every peer.
  std::string transport = "auto";
  bool crossMemoryAttach = true;  // CHORUS_CMA
  std::string tcpSockets;         // CHORUS_TCP_SOCKETS as given ("": the default)
  int timeoutMs = 300000;         // connection setup
};

// What a transport is made from.
struct TransportContext {
  Bootstrap& boot;
  // linked[r]: this rank reaches rank r over this transport (the same
  // answer on both sides).
  const std::vector<bool>& linked;
  // The doorbells of the ranks on this host; this rank's own is what its
  // executor sleeps on (a transport rings it when something arrives).
  RankBells& bells;
  const NetworkOptions& options;
  // Called (from any thread) when a peer is lost.
  std::function<void(int rank, const std::string& why)> onLoss;
};

// One connection of a fabric, as its two ends name it.
struct ConnectionSpec {
  uint32_t fabric = 0;
  int channel = 0, from = 0, to = 0;
  int slots = 0;
  size_t slotBytes = 0;
  std::string name;  // unique on the host (a shared segment's name)
};

// One transport's share of making one fabric, kept as long as the fabric
// (it owns what the connections use). Making is collective: every rank of
// the job calls open() for round 0 on each of its connections this
// transport links, all meet, round 1, all meet, then opened().
class FabricLinks {
 public:
  static constexpr int kRounds = 2;
  virtual ~FabricLinks() = default;
  // This rank's end of `c` if round `round` makes it, else null (exactly
  // one round makes each).
  virtual Result<std::unique_ptr<Connection>> open(int round, const ConnectionSpec& c) = 0;
  // After the last round's meeting (e.g. names no longer needed go).
  virtual void opened() {}
};

class PeerTransport {
 public:
  virtual ~PeerTransport() = default;
  virtual std::unique_ptr<FabricLinks> beginFabric() = 0;
  // What a waiting rank drives besides its doorbell (null: nothing).
  virtual Poller* poller() { return nullptr; }
  // Wakes this rank wherever this transport makes it sleep; any thread.
  virtual void interrupt() {}
  // Stops progress threads and says goodbye; idempotent, before the
  // bootstrap goes.
  virtual void shutdown() {}
};

// One row of the transport table (runtime/transport/registry.cc).
struct TransportChoice {
  std::string_view name;     // what CHORUS_TRANSPORT calls it
  std::string_view peersAs;  // how describe() lists its peers ("TCP to ranks")
  int cost;                  // lower wins among those that reach a peer
  // Its connections ring the peers' doorbells (a shared segment each rank
  // maps): the network maps the bells of the peers it links, and only
  // theirs (a host whose ranks do not share /dev/shm can still force TCP).
  bool peerBells;
  bool (*reaches)(const PeerPlace& peer);
  Result<std::unique_ptr<PeerTransport>> (*create)(TransportContext& context);
};

}  // namespace chorus::runtime
