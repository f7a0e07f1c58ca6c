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
#include <functional>
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
// A handle (binary) as hexadecimal text, and back (false: not hexadecimal).
std::string hexHandle(const std::string& bytes);
bool unhexHandle(const std::string& text, std::string* bytes);
Result<RankOffers> decodeOffers(int rank, const std::string& blob);

// Every rank's blob, by rank, for this rank's `mine` (a collective: the
// processes' bootstrap all-gather).
using BlobAllGather = std::function<Result<std::vector<std::string>>(const std::string&)>;

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
  // Called once every rank has mapped the regions of a successful
  // exchange: the regions of the exchange before it are used nowhere any
  // more, and names of the new ones are no longer needed.
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

// A connection's slot size for slices of `sliceBytes`: its largest message
// (PlanConn::maxCount chunks, which its sender and receiver both count)
// laid out for `protocol`, rounded to 16 bytes. Ranks apart size their
// connections so, not by their own largest message: every rank computes
// the same slice for a call, so all decide alike when connections grow.
uint64_t connSlotBytes(const PlanConn& c, ir::Protocol protocol, size_t sliceBytes);

// The connections of `plan` rank `focus` uses, as ConnViews by plan index
// (the rest null): inbound ones allocated here and offered, outbound ones
// mapped from their receivers' offers, after one exchange; a second
// all-gather then waits until every rank has mapped its peers' regions
// (ConnectionExchange::retire follows). Errors name the
// connection and the rank: an offer missing or given twice, a peer with
// another slot count, a blob that does not parse, an exchange that failed.
Result<std::vector<engine::ConnView>> exchangeConnections(const FlatPlan& plan, int focus,
                                                          ir::Protocol protocol, size_t sliceBytes,
                                                          int slots, ConnectionExchange& ex);

// Exchanges among `nranks` ranks of one process (tests, and step-engine
// ranks on threads), one per rank: heap memory (aligned for ConnCounters),
// handles that are its addresses, an all-gather over a barrier that fails
// after `timeoutMs` without every rank, or at once after a rank abandoned.
// Each rank calls its own from its own thread.
std::vector<std::shared_ptr<ConnectionExchange>> inProcessExchanges(int nranks,
                                                                    int timeoutMs = 60000);

// An exchange between processes of one host (the step engine's ranks in
// processes): each region a POSIX shared-memory segment named `label`-k,
// the handle its name; names are removed once every rank has mapped them
// (retire), so a killed process leaves only the segments of an exchange
// in flight, under the communicator's label. The blobs go through
// `allGather`.
std::shared_ptr<ConnectionExchange> sharedMemoryExchange(std::string label,
                                                         BlobAllGather allGather);

}  // namespace chorus::runtime
