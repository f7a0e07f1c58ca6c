#include "runtime/transport/process_fabric.h"

#include <unistd.h>

#include <algorithm>
#include <new>
#include <random>

#include "core/failpoint.h"
#include "core/log.h"
#include "runtime/transport/network.h"

namespace chorus::runtime {

namespace {

constexpr size_t kBellBytes = 4096;
// After the doorbell in each rank's segment: where to find a word in its
// process and the value it holds (the cross-memory attach probe).
constexpr size_t kProbeOffset = 2048;
struct ProbeWord {
  int32_t pid = 0;
  uint64_t address = 0;
  uint64_t value = 0;
};

std::string bellName(const std::string& prefix, int r) {
  return prefix + "-bell-" + std::to_string(r);
}

}  // namespace

Result<std::unique_ptr<RankBells>> RankBells::create(const std::string& prefix, int me, int n,
                                                     Bootstrap& boot,
                                                     const std::vector<bool>& remote,
                                                     bool tryCrossMemory) {
  std::unique_ptr<RankBells> b(new RankBells());
  b->me_ = me;
  b->segments_.resize(static_cast<size_t>(n));
  b->bells_.assign(static_cast<size_t>(n), nullptr);
  auto mine = Segment::create(bellName(prefix, me), kBellBytes);
  if (!mine.isOk()) return mine.status();
  b->bells_[static_cast<size_t>(me)] = new (mine.value()->data()) Doorbell(/*shared=*/true);
  // Where peers find a word to read in this process, and what it holds.
  std::random_device rd;
  b->probe_ = (uint64_t{rd()} << 32) | rd() | 1;
  auto* probe = reinterpret_cast<ProbeWord*>(static_cast<unsigned char*>(mine.value()->data()) +
                                             kProbeOffset);
  *probe = ProbeWord{static_cast<int32_t>(::getpid()), reinterpret_cast<uintptr_t>(&b->probe_),
                     b->probe_};
  b->segments_[static_cast<size_t>(me)] = std::move(mine).value();
  CHORUS_RETURN_IF_ERROR(boot.barrier());
  bool readable = tryCrossMemory;
  for (int r = 0; r < n; ++r) {
    if (r == me || remote[static_cast<size_t>(r)]) continue;
    auto s = Segment::open(bellName(prefix, r), kBellBytes);
    if (!s.isOk()) return s.status();
    b->bells_[static_cast<size_t>(r)] = static_cast<Doorbell*>(s.value()->data());
    if (readable) {
      ProbeWord theirs = *reinterpret_cast<const ProbeWord*>(
          static_cast<unsigned char*>(s.value()->data()) + kProbeOffset);
      uint64_t seen = 0;
      Status st = readPeerMemory(theirs.pid, theirs.address, &seen, sizeof seen,
                                 "rank " + std::to_string(r) + "'s probe word");
      readable = st.isOk() && seen == theirs.value;
      if (!readable) logLine(LogLevel::kInfo, "no cross-memory attach: " + st.message());
    }
    b->segments_[static_cast<size_t>(r)] = std::move(s).value();
  }
  // The ranks agree: single copies only if every rank can read its peers.
  auto all = boot.allGather(readable ? "1" : "0");
  if (!all.isOk()) return all.status();
  b->crossMemory_ = true;
  for (const std::string& v : all.value()) b->crossMemory_ = b->crossMemory_ && v == "1";
  b->segments_[static_cast<size_t>(me)]->unlink();
  return b;
}

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
  auto name = [&](const std::tuple<int, int, int>& k) {
    return prefix + "-c" + std::to_string(std::get<0>(k)) + "-" + std::to_string(std::get<1>(k)) +
           "-" + std::to_string(std::get<2>(k));
  };
  RankBells& bells = net.bells();
  TcpLinks* tcp = net.tcp();
  auto viaTcp = [&](const std::tuple<int, int, int>& k) {
    int other = std::get<1>(k) == me ? std::get<2>(k) : std::get<1>(k);
    return net.kind(other) == LinkKind::kTcp;
  };
  // Receivers create their inbound rings (TCP connections: both ends make
  // their side now)...
  std::vector<Segment*> created;
  for (const auto& [key, cnt] : largest) {
    const auto [channel, from, to] = key;
    if (from != me && to != me) continue;
    size_t slotBytes = static_cast<size_t>(cnt) * unitBytes;
    if (viaTcp(key)) {
      if (tcp == nullptr) return Status(StatusCode::kInternal, "a TCP peer but no TCP links");
      f->conns_[key] = tcp->connect(id, channel, from, to, slots, slotBytes);
      continue;
    }
    if (to != me) continue;
    auto s = Segment::create(name(key), LocalConnection::ringBytes(slots, slotBytes));
    if (!s.isOk()) return s.status();
    auto c = std::make_unique<LocalConnection>(s.value()->data(), true, slots, slotBytes,
                                               bells.crossMemoryAttach(), RankBells::kMinRefBytes);
    c->setDoorbells(&bells.bell(from), &bells.bell(to));
    f->conns_[key] = std::move(c);
    created.push_back(s.value().get());
    f->segments_.push_back(std::move(s).value());
  }
  CHORUS_RETURN_IF_ERROR(boot.barrier());
  // ...senders map theirs...
  for (const auto& [key, cnt] : largest) {
    const auto [channel, from, to] = key;
    if (from != me || to == me || viaTcp(key)) continue;
    size_t slotBytes = static_cast<size_t>(cnt) * unitBytes;
    auto s = Segment::open(name(key), LocalConnection::ringBytes(slots, slotBytes));
    if (!s.isOk()) return s.status();
    auto c = std::make_unique<LocalConnection>(s.value()->data(), false, slots, slotBytes,
                                               bells.crossMemoryAttach(), RankBells::kMinRefBytes);
    c->setDoorbells(&bells.bell(from), &bells.bell(to));
    f->conns_[key] = std::move(c);
    f->segments_.push_back(std::move(s).value());
  }
  CHORUS_RETURN_IF_ERROR(boot.barrier());
  // ...and once all are mapped, no name is needed any more.
  for (Segment* s : created) s->unlink();
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
