#include "runtime/transport/process_fabric.h"

#include "core/failpoint.h"
#include "runtime/transport/network.h"

namespace chorus::runtime {

Result<std::shared_ptr<ProcessFabric>> ProcessFabric::create(const ir::Algorithm& a, int me,
                                                             size_t unitBytes, int slots,
                                                             const std::string& prefix, uint32_t id,
                                                             Bootstrap& boot, Network& net) {
  return create(rankMessages(a, me), me, unitBytes, slots, prefix, id, boot, net);
}

size_t ProcessFabric::inboundUnits(const Links& links, int rank, int slots) {
  size_t units = 0;
  for (const auto& [key, cnt] : links)
    if (std::get<2>(key) == rank) units += static_cast<size_t>(slots) * static_cast<size_t>(cnt);
  return units;
}

size_t ProcessFabric::unitWithin(size_t mostInbound, size_t unitBytes, size_t budget) {
  if (mostInbound == 0 || mostInbound * unitBytes <= budget) return unitBytes;
  size_t unit = kMinUnit;
  while (unit * 2 <= unitBytes && mostInbound * unit * 2 <= budget) unit *= 2;
  return unit;
}

ProcessFabric::Links ProcessFabric::allPairs(int n, int me) {
  Links links;
  for (int b = 0; b < n; ++b)
    if (b != me) links[{0, me, b}] = links[{0, b, me}] = 1;
  return links;
}

Result<std::shared_ptr<ProcessFabric>> ProcessFabric::create(const Links& largest, int me,
                                                             size_t unitBytes, int slots,
                                                             const std::string& prefix, uint32_t id,
                                                             Bootstrap& boot, Network& net) {
  (void)failpoint("fabric.create");  // fault injection (core/failpoint.h)
  auto f = std::make_shared<ProcessFabric>();
  f->unitBytes_ = unitBytes;
  f->slots_ = slots;
  f->bells_ = &net.bells();
  f->links_.resize(net.transportCount());
  for (int round = 0; round < FabricLinks::kRounds; ++round) {
    for (const auto& [key, cnt] : largest) {
      const auto [channel, from, to] = key;
      if (from != me && to != me) continue;
      const int other = from == me ? to : from;
      std::unique_ptr<FabricLinks>& links = f->links_[net.transportIndex(other)];
      if (links == nullptr) links = net.transport(other).beginFabric();
      ConnectionSpec spec{id,
                          channel,
                          from,
                          to,
                          slots,
                          static_cast<size_t>(cnt) * unitBytes,
                          prefix + "-c" + std::to_string(channel) + "-" + std::to_string(from) +
                              "-" + std::to_string(to)};
      auto c = links->open(round, spec);
      if (!c.isOk()) return c.status();
      if (c.value() != nullptr) f->conns_[key] = std::move(c).value();
    }
    CHORUS_RETURN_IF_ERROR(boot.barrier());
  }
  for (auto& links : f->links_)
    if (links != nullptr) links->opened();
  return f;
}

Connection* ProcessFabric::find(int channel, int from, int to) const {
  auto it = conns_.find({channel, from, to});
  return it == conns_.end() ? nullptr : it->second.get();
}

void ProcessFabric::reset() {
  // Only the receiver's side may reset a shared ring; after a failed call
  // the communicator is unusable anyway (its peers are gone or aborted).
}

}  // namespace chorus::runtime
