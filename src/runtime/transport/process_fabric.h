// The connections of one multi-process fabric (an algorithm's, or the
// point-to-point one): each goes over the transport the Network links its
// peer with (runtime/transport/network.h). Creation is collective over the
// bootstrap, in FabricLinks' rounds: e.g. shared memory's receivers create
// their rings, all meet, senders map theirs, all meet again, and each
// unlinks what it created — from then on nothing has a name in /dev/shm, so
// nothing is left behind however the processes end.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ir/ir.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/transport/bells.h"
#include "runtime/transport/peer_transport.h"

namespace chorus::runtime {

class Network;  // runtime/transport/network.h

class ProcessFabric final : public Fabric {
 public:
  // Collective over every rank of `boot`, called at the same point by all
  // (same algorithm, unitBytes, slots, prefix and id). Only connections
  // that touch rank `me` exist here; each goes over the transport `net`
  // links its other end with.
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
  // Each transport's share (what the connections use): destroyed after them.
  std::vector<std::unique_ptr<FabricLinks>> links_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<Connection>> conns_;
};

}  // namespace chorus::runtime
