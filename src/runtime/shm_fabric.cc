#include "runtime/shm_fabric.h"

#include <new>

namespace chorus::runtime {

namespace {

constexpr size_t kBellBytes = 4096;

std::string bellName(const std::string& prefix, int r) {
  return prefix + "-bell-" + std::to_string(r);
}

}  // namespace

Result<std::unique_ptr<RankBells>> RankBells::create(const std::string& prefix, int me, int n,
                                                     Bootstrap& boot) {
  std::unique_ptr<RankBells> b(new RankBells());
  b->me_ = me;
  b->segments_.resize(static_cast<size_t>(n));
  b->bells_.assign(static_cast<size_t>(n), nullptr);
  auto mine = Segment::create(bellName(prefix, me), kBellBytes);
  if (!mine.isOk()) return mine.status();
  b->bells_[static_cast<size_t>(me)] = new (mine.value()->data()) Doorbell(/*shared=*/true);
  b->segments_[static_cast<size_t>(me)] = std::move(mine).value();
  CHORUS_RETURN_IF_ERROR(boot.barrier());
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    auto s = Segment::open(bellName(prefix, r), kBellBytes);
    if (!s.isOk()) return s.status();
    b->bells_[static_cast<size_t>(r)] = static_cast<Doorbell*>(s.value()->data());
    b->segments_[static_cast<size_t>(r)] = std::move(s).value();
  }
  CHORUS_RETURN_IF_ERROR(boot.barrier());
  b->segments_[static_cast<size_t>(me)]->unlink();
  return b;
}

Result<std::shared_ptr<ShmFabric>> ShmFabric::create(const ir::Algorithm& a, int me,
                                                     size_t unitBytes, int slots,
                                                     const std::string& prefix, Bootstrap& boot,
                                                     RankBells& bells) {
  auto f = std::make_shared<ShmFabric>();
  f->unitBytes_ = unitBytes;
  f->slots_ = slots;
  f->bells_ = &bells;
  auto largest = largestMessages(a);
  auto name = [&](const std::tuple<int, int, int>& k) {
    return prefix + "-c" + std::to_string(std::get<0>(k)) + "-" + std::to_string(std::get<1>(k)) +
           "-" + std::to_string(std::get<2>(k));
  };
  // Receivers create their inbound rings...
  std::vector<Segment*> created;
  for (const auto& [key, cnt] : largest) {
    if (std::get<2>(key) != me) continue;
    size_t slotBytes = static_cast<size_t>(cnt) * unitBytes;
    auto s = Segment::create(name(key), LocalConnection::ringBytes(slots, slotBytes));
    if (!s.isOk()) return s.status();
    f->conns_[key] = std::make_unique<LocalConnection>(s.value()->data(), true, slots, slotBytes);
    created.push_back(s.value().get());
    f->segments_.push_back(std::move(s).value());
  }
  CHORUS_RETURN_IF_ERROR(boot.barrier());
  // ...senders map theirs...
  for (const auto& [key, cnt] : largest) {
    if (std::get<1>(key) != me || std::get<2>(key) == me) continue;
    size_t slotBytes = static_cast<size_t>(cnt) * unitBytes;
    auto s = Segment::open(name(key), LocalConnection::ringBytes(slots, slotBytes));
    if (!s.isOk()) return s.status();
    f->conns_[key] = std::make_unique<LocalConnection>(s.value()->data(), false, slots, slotBytes);
    f->segments_.push_back(std::move(s).value());
  }
  CHORUS_RETURN_IF_ERROR(boot.barrier());
  // ...and once all are mapped, no name is needed any more.
  for (Segment* s : created) s->unlink();
  for (auto& [key, c] : f->conns_)
    c->setDoorbells(&bells.bell(std::get<1>(key)), &bells.bell(std::get<2>(key)));
  return f;
}

LocalConnection* ShmFabric::find(int channel, int from, int to) const {
  auto it = conns_.find({channel, from, to});
  return it == conns_.end() ? nullptr : it->second.get();
}

void ShmFabric::reset() {
  // Only the receiver's side may reset a shared ring; after a failed call
  // the communicator is unusable anyway (its peers are gone or aborted).
}

}  // namespace chorus::runtime
