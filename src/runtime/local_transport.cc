#include "runtime/local_transport.h"

#include <cstring>

#include "core/check.h"

namespace chorus::runtime {

LocalConnection::LocalConnection(int slots, size_t slotBytes)
    : slots_(slots),
      slotBytes_(slotBytes),
      storage_(new unsigned char[static_cast<size_t>(slots) * (slotBytes == 0 ? 1 : slotBytes)]),
      sizes_(static_cast<size_t>(slots), 0) {
  CHORUS_CHECK(slots > 0, "a connection needs at least one slot");
  // Touch every page now: first touch is expensive and must not happen on
  // the critical path of a collective.
  std::memset(storage_.get(), 0, static_cast<size_t>(slots) * (slotBytes == 0 ? 1 : slotBytes));
}

uint64_t LocalConnection::inFlight() const {
  return head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_acquire);
}

void LocalConnection::reset() {
  head_.store(0, std::memory_order_relaxed);
  tail_.store(0, std::memory_order_relaxed);
}

void* LocalConnection::Sender::tryAcquire(size_t bytes) {
  CHORUS_CHECK(bytes <= c_.slotBytes_, "message larger than the connection's slots");
  uint64_t head = c_.head_.load(std::memory_order_relaxed);
  if (head - c_.tail_.load(std::memory_order_acquire) >= static_cast<uint64_t>(c_.slots_))
    return nullptr;
  return c_.storage_.get() + (head % static_cast<uint64_t>(c_.slots_)) * c_.slotBytes_;
}

void LocalConnection::Sender::commit(size_t bytes) {
  uint64_t head = c_.head_.load(std::memory_order_relaxed);
  c_.sizes_[head % static_cast<uint64_t>(c_.slots_)] = bytes;
  c_.head_.store(head + 1, std::memory_order_release);
  if (c_.receiverBell_ != nullptr) c_.receiverBell_->ring();
}

const void* LocalConnection::Receiver::tryPeek(size_t* bytes) {
  uint64_t tail = c_.tail_.load(std::memory_order_relaxed);
  if (c_.head_.load(std::memory_order_acquire) == tail) return nullptr;
  size_t slot = tail % static_cast<uint64_t>(c_.slots_);
  *bytes = c_.sizes_[slot];
  return c_.storage_.get() + slot * c_.slotBytes_;
}

void LocalConnection::Receiver::release() {
  uint64_t tail = c_.tail_.load(std::memory_order_relaxed);
  c_.tail_.store(tail + 1, std::memory_order_release);
  if (c_.senderBell_ != nullptr) c_.senderBell_->ring();
}

}  // namespace chorus::runtime
