// Connections between ranks in different processes: over shared-memory
// segments with ranks on the same host, over TCP with the others (or with
// all, when TCP is forced). Each rank sleeps on a doorbell in its own small
// segment that its same-host peers map (RankBells); each shared-memory
// connection's ring is a segment created by its receiver and mapped by its
// sender. Creation is collective over the bootstrap: every rank creates
// what it receives on, all meet, every rank maps what it sends on, all meet
// again, and each unlinks what it created — from then on nothing has a name
// in /dev/shm, so nothing is left behind however the processes end.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ir/ir.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/transport/local_transport.h"
#include "runtime/transport/shm.h"
#include "runtime/transport/tcp_transport.h"

namespace chorus::runtime {

class Network;  // runtime/transport/network.h

class RankBells {
 public:
  // Collective: `prefix` is the communicator's segment name prefix. Only
  // the bells of ranks with `remote[r]` false are mapped (the others live
  // on other hosts, or are reached over TCP anyway). With `tryCrossMemory`
  // (every rank must pass the same) each rank also tries to read a word in
  // each mapped peer's memory with cross-memory attach; crossMemoryAttach()
  // then says whether every rank could (a container or Yama's ptrace_scope
  // may forbid it).
  static Result<std::unique_ptr<RankBells>> create(const std::string& prefix, int me, int n,
                                                   Bootstrap& boot, const std::vector<bool>& remote,
                                                   bool tryCrossMemory = false);
  Doorbell& bell(int rank) { return *bells_[static_cast<size_t>(rank)]; }
  int me() const { return me_; }
  bool crossMemoryAttach() const { return crossMemory_; }
  // Shared-memory messages this large or larger travel by reference when
  // crossMemoryAttach(): below it, a copy through the ring costs less than
  // the system call.
  static constexpr size_t kMinRefBytes = size_t{64} << 10;

 private:
  int me_ = 0;
  bool crossMemory_ = false;
  uint64_t probe_ = 0;  // a peer reads this to see whether it can
  std::vector<std::unique_ptr<Segment>> segments_;
  std::vector<Doorbell*> bells_;
};

class ProcessFabric final : public Fabric {
 public:
  // Collective over every rank of `boot`, called at the same point by all
  // (same algorithm, unitBytes, slots, prefix and id). Only connections
  // that touch rank `me` exist here; each goes over the link `net` has to
  // its other end (a shared-memory ring, or a TCP stream).
  static Result<std::shared_ptr<ProcessFabric>> create(const ir::Algorithm& a, int me,
                                                       size_t unitBytes, int slots,
                                                       const std::string& prefix, uint32_t id,
                                                       Bootstrap& boot, Network& net);
  // The same for given connections: (channel, from, to) -> slot size in units.
  using Links = std::map<std::tuple<int, int, int>, int>;
  static Result<std::shared_ptr<ProcessFabric>> create(const Links& links, int me, size_t unitBytes,
                                                       int slots, const std::string& prefix,
                                                       uint32_t id, Bootstrap& boot, Network& net);
  // Every ordered pair of `n` ranks with `me` at one end, on channel 0, one
  // unit per slot (sends and receives).
  static Links allPairs(int n, int me);
  // Slots x cnt summed over `links`' connections into `rank`: its inbound
  // rings' size in units.
  static size_t inboundUnits(const Links& links, int rank, int slots);
  // The unit (slice) that keeps every rank's inbound rings within `budget`
  // bytes, given the most units any rank receives into (inboundUnits, the
  // largest over the ranks): `unitBytes` itself when they fit, else the
  // largest power of two that does (at least kMinUnit). Both ends of a ring
  // must agree on it: every rank passes the same `mostInbound`.
  static constexpr size_t kMinUnit = size_t{4} << 10;
  static size_t unitWithin(size_t mostInbound, size_t unitBytes, size_t budget);
  size_t unitBytes() const override { return unitBytes_; }
  int slots() const override { return slots_; }
  Connection* find(int channel, int from, int to) const override;
  Doorbell& bell(int rank) override { return bells_->bell(rank); }
  void ringAll() override { bells_->bell(bells_->me()).ring(); }
  void reset() override;

 private:
  size_t unitBytes_ = 0;
  int slots_ = 0;
  RankBells* bells_ = nullptr;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<Connection>> conns_;
};

}  // namespace chorus::runtime
