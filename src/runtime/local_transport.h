// In-process transport: a bounded ring of preallocated slots per connection,
// single producer / single consumer, safe for the sender and receiver to run
// on different threads (acquire/release on the head and tail indices). All
// memory is allocated and touched once at construction; nothing is allocated
// per message.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/transport.h"

namespace chorus::runtime {

// Wakes a thread that waits for something to change: peers ring it after
// every message they commit to, or slot they free for, its owner. Waiting
// uses C++20 atomic wait (a futex on Linux): no spinning.
class Doorbell {
 public:
  uint32_t value() const { return v_.load(std::memory_order_acquire); }
  void ring() {
    v_.fetch_add(1, std::memory_order_release);
    v_.notify_all();
  }
  // Returns once the value differs from `seen` (at once if it already does).
  void wait(uint32_t seen) const { v_.wait(seen, std::memory_order_acquire); }

 private:
  std::atomic<uint32_t> v_{0};
};

class LocalConnection {
 public:
  // `slots` messages of up to `slotBytes` each may be in flight.
  LocalConnection(int slots, size_t slotBytes);
  LocalConnection(const LocalConnection&) = delete;
  LocalConnection& operator=(const LocalConnection&) = delete;

  // Doorbells to ring on commit (the receiver's) and on release (the
  // sender's); either may be null.
  void setDoorbells(Doorbell* senderBell, Doorbell* receiverBell) {
    senderBell_ = senderBell;
    receiverBell_ = receiverBell;
  }

  SendPort& sender() { return sender_; }
  RecvPort& receiver() { return receiver_; }
  size_t slotBytes() const { return slotBytes_; }
  // Messages committed and not yet released (for diagnostics).
  uint64_t inFlight() const;
  // Drops every message (after an aborted call). Not thread-safe: no sender
  // or receiver may be active.
  void reset();

 private:
  class Sender final : public SendPort {
   public:
    explicit Sender(LocalConnection& c) : c_(c) {}
    void* tryAcquire(size_t bytes) override;
    void commit(size_t bytes) override;

   private:
    LocalConnection& c_;
  };
  class Receiver final : public RecvPort {
   public:
    explicit Receiver(LocalConnection& c) : c_(c) {}
    const void* tryPeek(size_t* bytes) override;
    void release() override;

   private:
    LocalConnection& c_;
  };

  const int slots_;
  const size_t slotBytes_;
  std::unique_ptr<unsigned char[]> storage_;
  std::vector<size_t> sizes_;
  std::atomic<uint64_t> head_{0};  // next message to commit (sender)
  std::atomic<uint64_t> tail_{0};  // next message to release (receiver)
  Doorbell* senderBell_ = nullptr;
  Doorbell* receiverBell_ = nullptr;
  Sender sender_{*this};
  Receiver receiver_{*this};
};

}  // namespace chorus::runtime
