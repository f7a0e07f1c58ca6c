// Connections shared between ranks that run apart (issue 41): each rank's
// step engine runs only its own blocks, and a connection's counters and
// slots live in memory its receiver allocates and its sender maps. On GPUs
// of one node the memory is device memory shared by CUDA IPC handles; on
// the host, shared memory; in tests, the heap of one process. This file is
// the part every such world shares: which connections a rank allocates and
// which it maps, the offers receivers publish, and the match of each
// sender's connection with its receiver's offer, all checked.
//
// Connections are named by their key (instance, channel, from, to), not
// by their index in a plan: a rank's part of an algorithm (a part plan)
// numbers its connections in its own order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"
#include "runtime/exec/engine.h"
#include "runtime/exec/flat_plan.h"

namespace chorus::runtime {

struct ConnKey {
  int32_t instance = 0, channel = 0, from = 0, to = 0;
  auto tie() const { return std::tie(instance, channel, from, to); }
  bool operator==(const ConnKey& o) const { return tie() == o.tie(); }
  bool operator<(const ConnKey& o) const { return tie() < o.tie(); }
  std::string describe() const;  // "rank 1 -> rank 2, channel 0, instance 3"
};
ConnKey keyOf(const PlanConn& c);

// What a receiver publishes for one inbound connection: its memory's
// handle, laid out as ConnCounters then `slots` slots of `slotBytes`.
struct ConnOffer {
  ConnKey key;
  uint64_t slotBytes = 0;
  int slots = 0;
  std::string handle;  // the memory's, opaque (binary is fine)
};

// One rank's offers as a blob for the exchange, with the instances its
// plan runs (peers must agree), and back. decodeOffers checks the blob's
// form and that every offer is for a connection into `rank`
// (kInvalidArgument naming the rank and what is wrong).
struct RankOffers {
  int instances = 1;
  int protocol = 0;  // an ir::Protocol: the slots' layout
  std::vector<ConnOffer> offers;
};
std::string encodeOffers(int rank, const RankOffers& offers);
Result<RankOffers> decodeOffers(int rank, const std::string& blob);

// Memory a rank shares with its peers, and the collective exchange of
// blobs. Every rank calls allGather at the same points (the first call of
// an algorithm, and a call that needs larger slots), with the rank's blob;
// it returns every rank's, by rank.
class ConnectionExchange {
 public:
  virtual ~ConnectionExchange() = default;
  struct Region {
    unsigned char* data = nullptr;
    std::string handle;
  };
  // `bytes` of zeroed memory peers can map, and its handle.
  virtual Result<Region> allocate(size_t bytes) = 0;
  // A peer's region, mapped here.
  virtual Result<unsigned char*> open(int peer, const std::string& handle, size_t bytes) = 0;
  // Regions allocated or opened before and not used since the last
  // exchange may go: called after a successful exchange with the new ones.
  virtual void retire() {}
  virtual Result<std::vector<std::string>> allGather(const std::string& mine) = 0;
  // This rank failed and will not reach the next exchange: peers waiting
  // in allGather (now or later) get `why` instead of waiting for it.
  virtual void abandon(const Status& why) { (void)why; }
};

// Bytes of one connection's region.
inline size_t connRegionBytes(uint64_t slotBytes, int slots) {
  return sizeof(engine::ConnCounters) + static_cast<size_t>(slotBytes) * static_cast<size_t>(slots);
}

// The connections of `plan` rank `focus` uses, as ConnViews by plan index
// (the rest null): inbound ones allocated here and offered, outbound ones
// mapped from their receivers' offers, after one exchange. Errors name the
// connection and the rank: an offer missing or given twice, a peer with
// another slot count, a blob that does not parse, an exchange that failed.
Result<std::vector<engine::ConnView>> exchangeConnections(const FlatPlan& plan, int focus,
                                                          ir::Protocol protocol, size_t msgBytes,
                                                          int slots, ConnectionExchange& ex);

// Exchanges among `nranks` ranks of one process (tests, and step-engine
// ranks on threads), one per rank: heap memory (aligned for ConnCounters),
// handles that are its addresses, an all-gather over a barrier that fails
// after `timeoutMs` without every rank, or at once after a rank abandoned.
// Each rank calls its own from its own thread.
std::vector<std::shared_ptr<ConnectionExchange>> inProcessExchanges(int nranks,
                                                                    int timeoutMs = 60000);

}  // namespace chorus::runtime
