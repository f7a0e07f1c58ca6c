// In-process transport: a bounded ring of preallocated slots per connection,
// single producer / single consumer, safe for the sender and receiver to run
// on different threads (acquire/release on the head and tail indices). All
// memory is allocated and touched once at construction; nothing is allocated
// per message. Sender and receiver share an address space, so a message may
// also travel by reference (one copy per hop instead of two).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "ir/ir.h"
#include "runtime/transport/shared_buffers.h"
#include "runtime/transport/transport.h"

namespace chorus::runtime {

// Wakes a thread that waits for something to change: peers ring it after
// every message they commit to, or slot they free for, its owner. Waiting is
// a futex wait (no spinning); ring() only enters the kernel when someone
// sleeps.
class Doorbell {
 public:
  // `shared`: the doorbell lives in memory shared between processes (a
  // shared futex); otherwise process-private (cheaper).
  explicit Doorbell(bool shared = false) : shared_(shared) {}
  uint32_t value() const { return v_.load(std::memory_order_acquire); }
  void ring();
  // Returns once the value differs from `seen` (at once if it already does)
  // or after `timeoutMs` (< 0: no timeout). Spurious returns are allowed.
  void wait(uint32_t seen, int timeoutMs = -1) const;

 private:
  std::atomic<uint32_t> v_{0};
  mutable std::atomic<uint32_t> sleepers_{0};
  bool shared_ = false;
};

// The part of a connection that both sides touch: indices, message sizes,
// marks and slots, laid out in one block of memory (the heap for ranks in one process,
// a shared-memory segment for ranks in two). Standard layout; head and tail
// sit on their own cache lines.
struct RingHeader {
  static constexpr uint32_t kMagic = 0x52524843;  // "CHRR"
  alignas(64) std::atomic<uint64_t> head{0};      // next message to commit (sender)
  alignas(64) std::atomic<uint64_t> tail{0};      // next message to release (receiver)
  alignas(64) uint32_t magic = kMagic;
  uint32_t slots = 0;
  uint64_t slotBytes = 0;
  int32_t senderPid = 0;  // for references across processes
};

// What describes the message in one slot, on a cache line of its own: a
// receiver polls `seq` and finds the rest on the same line.
struct alignas(64) SlotInfo {
  std::atomic<uint64_t> seq{0};  // message number + 1 once its message is in
  uint64_t bytes = 0;
  uint64_t ref = 0;     // non-zero: the message is the sender's memory there
  SharedRegion region;  // id non-zero: that memory is in this mappable region
  uint32_t mark = 0;    // the message's mark (SendPort::commit)
};
static_assert(sizeof(SlotInfo) == 64);

class LocalConnection final : public Connection {
 public:
  // `slots` messages of up to `slotBytes` each may be in flight; the ring
  // lives on the heap and messages may travel by reference.
  LocalConnection(int slots, size_t slotBytes);
  // A view over a ring in `memory` (ringBytes() long), e.g. a shared-memory
  // segment mapped by both processes. `create`: the receiver initializes it,
  // before the sender attaches (and records its pid). Without
  // `crossMemoryAttach` messages are copied into slots; with it, messages of
  // at least `minRefBytes` may travel by reference and the receiver copies
  // them straight from the sender's memory (readPeerMemory).
  LocalConnection(void* memory, bool create, int slots, size_t slotBytes,
                  bool crossMemoryAttach = false, size_t minRefBytes = 0);
  static size_t ringBytes(int slots, size_t slotBytes);
  // Across processes, messages larger than this go through the ring: one
  // copy by cross-memory attach of a message that size measured slower here
  // than two copies pipelined through the ring by both sides.
  static constexpr size_t kMaxCrossRefBytes = size_t{8} << 20;
  ~LocalConnection();
  LocalConnection(const LocalConnection&) = delete;
  LocalConnection& operator=(const LocalConnection&) = delete;

  // Doorbells to ring on commit (the receiver's) and on release (the
  // sender's); either may be null.
  void setDoorbells(Doorbell* senderBell, Doorbell* receiverBell) {
    senderBell_ = senderBell;
    receiverBell_ = receiverBell;
  }

  SendPort& sender() override { return sender_; }
  RecvPort& receiver() override { return receiver_; }
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
    void commit(size_t bytes, uint32_t mark) override;
    bool tryPostRef(const void* data, size_t bytes, uint32_t mark,
                    const SharedRegion* region) override;
    bool supportsRefs() const override { return c_.refsAllowed_; }
    bool supportsSharedRefs() const override { return c_.refsAllowed_ && c_.crossProcess_; }
    size_t minRefBytes() const override { return c_.minRefBytes_; }
    bool refsForCopiesOnly() const override { return c_.crossProcess_; }
    size_t maxRefBytes() const override { return c_.crossProcess_ ? kMaxCrossRefBytes : SIZE_MAX; }
    bool drained() const override;

   private:
    LocalConnection& c_;
  };
  class Receiver final : public RecvPort {
   public:
    explicit Receiver(LocalConnection& c) : c_(c) {}
    const void* tryPeek(size_t* bytes) override;
    bool peekedRemote() const override { return remoteAt_ != 0; }
    uint32_t peekedMark() const override { return mark_; }
    Status fetch(void* dst, size_t offset, size_t bytes) override;
    void release() override;

   private:
    LocalConnection& c_;
    uint64_t remoteAt_ = 0;  // the peeked message's address in the sender
    uint32_t mark_ = 0;      // the peeked message's mark
    // The sender's mappable buffer this side read the last message from.
    std::shared_ptr<const shared_buffers::PeerMapping> mapped_;
  };
  void publish(uint64_t head, size_t bytes, uint32_t mark, const void* ref,
               const SharedRegion* region);
  void layOut(unsigned char* memory, bool create);

  const int slots_;
  const size_t slotBytes_;
  bool ownsMemory_ = false;
  bool refsAllowed_ = true;
  bool crossProcess_ = false;  // references are addresses in the sender's process
  size_t minRefBytes_ = 0;
  unsigned char* memory_ = nullptr;  // ringBytes(): header, slot lines, slots
  RingHeader* ring_ = nullptr;
  SlotInfo* info_ = nullptr;  // per slot
  unsigned char* storage_ = nullptr;
  Doorbell* senderBell_ = nullptr;
  Doorbell* receiverBell_ = nullptr;
  Sender sender_{*this};
  Receiver receiver_{*this};
};

// The connections of one algorithm that executors in this process use, and
// the doorbell each of their ranks sleeps on. Slots hold `unitBytes` per
// chunk of the largest message on each connection, so one fabric serves
// every call whose slice of a chunk fits (calls of any size reuse it; only a
// larger slice needs a new one).
class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual size_t unitBytes() const = 0;
  virtual int slots() const = 0;
  // nullptr if the algorithm has no such connection (or it does not touch
  // this process's ranks).
  virtual Connection* find(int channel, int from, int to) const = 0;
  virtual Doorbell& bell(int rank) = 0;
  virtual void ringAll() = 0;
  // Drops in-flight messages after a failed call (no rank may be running).
  virtual void reset() = 0;

  // The largest `cnt` any step sends on each (channel, sender, receiver).
  static std::map<std::tuple<int, int, int>, int> largestMessages(const ir::Algorithm& a);
  // The same for rank `rank`'s connections alone (it sends or receives on
  // them), from its own steps: what a part (VerifiedAlgorithm::part) knows.
  // A receive's cnt is its send's (the verifier's E203), so each entry is
  // largestMessages' for that connection.
  static std::map<std::tuple<int, int, int>, int> rankMessages(const ir::Algorithm& a, int rank);
};

// All ranks in this process: connections on the heap, references allowed.
class LocalFabric final : public Fabric {
 public:
  LocalFabric(const ir::Algorithm& a, size_t unitBytes, int slots);
  size_t unitBytes() const override { return unitBytes_; }
  int slots() const override { return slots_; }
  LocalConnection* find(int channel, int from, int to) const override;
  Doorbell& bell(int rank) override { return *bells_[static_cast<size_t>(rank)]; }
  void ringAll() override;
  void reset() override;

 private:
  size_t unitBytes_;
  int slots_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<LocalConnection>> conns_;
  std::vector<std::unique_ptr<Doorbell>> bells_;
};

}  // namespace chorus::runtime
