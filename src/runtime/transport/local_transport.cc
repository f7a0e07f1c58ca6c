#include "runtime/transport/local_transport.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <ctime>
#include <new>

#include "core/check.h"
#include "core/failpoint.h"
#include "runtime/transport/shm.h"

namespace chorus::runtime {

namespace {

// std::atomic<uint32_t> has the layout of a uint32_t on Linux (lock-free).
long futex(const std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<const uint32_t*>(addr), op, val, ts, nullptr, 0);
}

}  // namespace

void Doorbell::ring() {
  v_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) != 0)
    futex(&v_, shared_ ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}

void Doorbell::wait(uint32_t seen, int timeoutMs) const {
  // Register before the final check: ring() either sees a sleeper or its
  // increment is visible here (both sides are sequentially consistent).
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (v_.load(std::memory_order_seq_cst) == seen) {
    timespec ts{timeoutMs / 1000, static_cast<long>(timeoutMs % 1000) * 1000000L};
    futex(&v_, shared_ ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, seen, timeoutMs < 0 ? nullptr : &ts);
  }
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

namespace {

// Header, then a SlotInfo per slot, then the slots.
size_t headerBytes() { return (sizeof(RingHeader) + 63) / 64 * 64; }
// Per slot, what describes its message, on a cache line of its own.
size_t infoBytes(int slots) { return static_cast<size_t>(slots) * sizeof(SlotInfo); }
// Slots start on cache lines, so every element type is aligned in them
// whatever the slot's size (an int8 call's odd slices made a later uint64
// call on the same connection reduce at misaligned addresses: found by the
// soak under UBSan).
size_t slotStride(size_t slotBytes) { return (std::max<size_t>(slotBytes, 1) + 63) / 64 * 64; }

}  // namespace

size_t LocalConnection::ringBytes(int slots, size_t slotBytes) {
  return headerBytes() + infoBytes(slots) + static_cast<size_t>(slots) * slotStride(slotBytes);
}

void LocalConnection::layOut(unsigned char* memory, bool create) {
  memory_ = memory;
  size_t header = headerBytes();
  ring_ = create ? new (memory) RingHeader() : reinterpret_cast<RingHeader*>(memory);
  info_ = reinterpret_cast<SlotInfo*>(memory + header);
  storage_ = memory + header + infoBytes(slots_);
  if (create) {
    ring_->slots = static_cast<uint32_t>(slots_);
    ring_->slotBytes = slotBytes_;
    // Touch every page now: first touch is expensive and must not happen on
    // the critical path of a collective.
    std::memset(memory + header, 0, ringBytes(slots_, slotBytes_) - header);
    for (int i = 0; i < slots_; ++i) new (&info_[i]) SlotInfo();
  }
  CHORUS_CHECK(ring_->magic == RingHeader::kMagic &&
                   ring_->slots == static_cast<uint32_t>(slots_) && ring_->slotBytes == slotBytes_,
               "a connection ring does not have the layout both sides agreed on");
}

LocalConnection::LocalConnection(int slots, size_t slotBytes)
    : slots_(slots), slotBytes_(slotBytes) {
  CHORUS_CHECK(slots > 0, "a connection needs at least one slot");
  ownsMemory_ = true;
  layOut(new (std::align_val_t(64)) unsigned char[ringBytes(slots, slotBytes)], true);
}

LocalConnection::LocalConnection(void* memory, bool create, int slots, size_t slotBytes,
                                 bool crossMemoryAttach, size_t minRefBytes)
    : slots_(slots),
      slotBytes_(slotBytes),
      refsAllowed_(crossMemoryAttach),
      crossProcess_(true),
      minRefBytes_(minRefBytes) {
  CHORUS_CHECK(slots > 0, "a connection needs at least one slot");
  layOut(static_cast<unsigned char*>(memory), create);
  if (!create) ring_->senderPid = static_cast<int32_t>(::getpid());
}

LocalConnection::~LocalConnection() {
  if (ownsMemory_) {
    ring_->~RingHeader();
    ::operator delete[](memory_, std::align_val_t(64));
  }
}

uint64_t LocalConnection::inFlight() const {
  return ring_->head.load(std::memory_order_acquire) - ring_->tail.load(std::memory_order_acquire);
}

void LocalConnection::reset() {
  ring_->head.store(0, std::memory_order_relaxed);
  ring_->tail.store(0, std::memory_order_relaxed);
  for (int i = 0; i < slots_; ++i) info_[i].seq.store(0, std::memory_order_relaxed);
}

void LocalConnection::publish(uint64_t head, size_t bytes, uint32_t mark, const void* ref,
                              const SharedRegion* region) {
  size_t slot = head % static_cast<uint64_t>(slots_);
  SlotInfo& info = info_[slot];
  info.bytes = bytes;
  info.mark = mark;
  info.ref = reinterpret_cast<uintptr_t>(ref);
  if (crossProcess_) info.region = region != nullptr ? *region : SharedRegion{};
  info.seq.store(head + 1, std::memory_order_release);
  ring_->head.store(head + 1, std::memory_order_release);
  if (receiverBell_ != nullptr) receiverBell_->ring();
}

void* LocalConnection::Sender::tryAcquire(size_t bytes) {
  CHORUS_CHECK(bytes <= c_.slotBytes_, "message larger than the connection's slots");
  uint64_t head = c_.ring_->head.load(std::memory_order_relaxed);
  if (head - c_.ring_->tail.load(std::memory_order_acquire) >= static_cast<uint64_t>(c_.slots_))
    return nullptr;
  return c_.storage_ + (head % static_cast<uint64_t>(c_.slots_)) * slotStride(c_.slotBytes_);
}

void LocalConnection::Sender::commit(size_t bytes, uint32_t mark) {
  c_.publish(c_.ring_->head.load(std::memory_order_relaxed), bytes, mark, nullptr, nullptr);
}

bool LocalConnection::Sender::tryPostRef(const void* data, size_t bytes, uint32_t mark,
                                         const SharedRegion* region) {
  if (!c_.refsAllowed_) return false;
  uint64_t head = c_.ring_->head.load(std::memory_order_relaxed);
  if (head - c_.ring_->tail.load(std::memory_order_acquire) >= static_cast<uint64_t>(c_.slots_))
    return false;
  c_.publish(head, bytes, mark, data, region);
  return true;
}

bool LocalConnection::Sender::drained() const {
  return c_.ring_->tail.load(std::memory_order_acquire) ==
         c_.ring_->head.load(std::memory_order_relaxed);
}

const void* LocalConnection::Receiver::tryPeek(size_t* bytes) {
  // The slot's own line says whether its message is in (one cache line
  // to fetch from the sender, not the head's and then the slot's).
  uint64_t tail = c_.ring_->tail.load(std::memory_order_relaxed);
  size_t slot = tail % static_cast<uint64_t>(c_.slots_);
  const SlotInfo& info = c_.info_[slot];
  if (info.seq.load(std::memory_order_acquire) != tail + 1) return nullptr;
  *bytes = static_cast<size_t>(info.bytes);
  mark_ = info.mark;
  remoteAt_ = 0;
  if (info.ref != 0) {
    if (!c_.crossProcess_) return reinterpret_cast<const void*>(info.ref);
    const SharedRegion& r = info.region;
    if (r.id != 0) {
      // In the sender's mappable buffer: read it in place once mapped.
      if (mapped_ == nullptr || mapped_->region().id != r.id)
        mapped_ = shared_buffers::PeerMapping::get(c_.ring_->senderPid, r, nullptr);
      // Only within the region as first mapped (what the ring says is
      // the peer's word: a bad one fails the read below, never faults).
      const SharedRegion& m = mapped_ != nullptr ? mapped_->region() : r;
      uint64_t at = info.ref;
      if (mapped_ != nullptr && at >= m.base && *bytes <= m.bytes &&
          at - m.base <= m.bytes - *bytes) {
        (void)failpoint("peer.read");  // fault injection (core/failpoint.h)
        return mapped_->at(at);
      }
    }
    remoteAt_ = info.ref;  // else one copy by cross-memory attach
  }
  return c_.storage_ + slot * slotStride(c_.slotBytes_);
}

Status LocalConnection::Receiver::fetch(void* dst, size_t offset, size_t bytes) {
  CHORUS_CHECK(remoteAt_ != 0, "fetch() of a message that is not remote");
  return readPeerMemory(c_.ring_->senderPid, remoteAt_ + offset, dst, bytes,
                        "a message posted by reference");
}

void LocalConnection::Receiver::release() {
  remoteAt_ = 0;
  uint64_t tail = c_.ring_->tail.load(std::memory_order_relaxed);
  c_.ring_->tail.store(tail + 1, std::memory_order_release);
  if (c_.senderBell_ != nullptr) c_.senderBell_->ring();
}

std::map<std::tuple<int, int, int>, int> Fabric::largestMessages(const ir::Algorithm& a) {
  std::map<std::tuple<int, int, int>, int> largest;
  for (const ir::Rank& r : a.ranks)
    for (const ir::Threadblock& tb : r.tbs)
      for (const ir::Step& st : tb.steps)
        if (ir::sends(st.type)) {
          int& l = largest[{tb.channel, r.id, tb.sendPeer}];
          l = std::max(l, st.count);
        }
  return largest;
}

std::map<std::tuple<int, int, int>, int> Fabric::rankMessages(const ir::Algorithm& a, int rank) {
  std::map<std::tuple<int, int, int>, int> largest;
  for (const ir::Threadblock& tb : a.ranks[static_cast<size_t>(rank)].tbs)
    for (const ir::Step& st : tb.steps) {
      if (ir::sends(st.type)) {
        int& l = largest[{tb.channel, rank, tb.sendPeer}];
        l = std::max(l, st.count);
      }
      if (ir::receives(st.type)) {
        int& l = largest[{tb.channel, tb.recvPeer, rank}];
        l = std::max(l, st.count);
      }
    }
  return largest;
}

LocalFabric::LocalFabric(const ir::Algorithm& a, size_t unitBytes, int slots)
    : unitBytes_(unitBytes), slots_(slots) {
  for (int r = 0; r < a.ngpus; ++r) bells_.push_back(std::make_unique<Doorbell>());
  // One connection per (channel, sender, receiver), sized for the largest
  // message any step sends on it in one iteration.
  for (const auto& [key, cnt] : largestMessages(a)) {
    auto c = std::make_unique<LocalConnection>(slots, static_cast<size_t>(cnt) * unitBytes);
    c->setDoorbells(bells_[static_cast<size_t>(std::get<1>(key))].get(),
                    bells_[static_cast<size_t>(std::get<2>(key))].get());
    conns_[key] = std::move(c);
  }
}

LocalConnection* LocalFabric::find(int channel, int from, int to) const {
  auto it = conns_.find({channel, from, to});
  return it == conns_.end() ? nullptr : it->second.get();
}

void LocalFabric::ringAll() {
  for (auto& b : bells_) b->ring();
}

void LocalFabric::reset() {
  for (auto& [key, c] : conns_) c->reset();
}

}  // namespace chorus::runtime
