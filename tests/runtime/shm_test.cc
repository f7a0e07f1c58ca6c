// Shared-memory segments and connection rings between two real processes:
// a forked sender streams messages of every size through 2 slots
// (backpressure both ways, shared futex doorbells); the names are unlinked
// as soon as both sides have mapped them, and nothing is left behind; in
// one process, a slot's own line says what is in it, also after reset().
#include "runtime/transport/shm.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "runtime/transport/local_transport.h"
#include "runtime/transport/shared_buffers.h"

namespace chorus::runtime {
namespace {

std::string uniqueName(const char* what) {
  return "/chorus-test-" + std::to_string(::getpid()) + "-" + what;
}

TEST(Shm, CreateOpenUnlink) {
  std::string name = uniqueName("seg");
  auto a = Segment::create(name, 1 << 16);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  EXPECT_FALSE(Segment::create(name, 1 << 16).isOk());  // exclusive
  auto b = Segment::open(name, 1 << 16);
  ASSERT_TRUE(b.isOk());
  static_cast<char*>(a.value()->data())[100] = 'x';
  EXPECT_EQ(static_cast<char*>(b.value()->data())[100], 'x');
  auto tooBig = Segment::open(name, 1 << 20);
  EXPECT_EQ(tooBig.status().code(), StatusCode::kInvalidArgument);
  a.value()->unlink();
  EXPECT_FALSE(Segment::open(name, 1 << 16).isOk());  // the name is gone...
  static_cast<char*>(b.value()->data())[200] = 'y';   // ...the mappings are not
  EXPECT_EQ(static_cast<char*>(a.value()->data())[200], 'y');
}

// A segment /dev/shm cannot hold is an error now (with nothing left
// behind), not a SIGBUS at some later write.
TEST(Shm, ASegmentTooLargeForDevShmIsAnError) {
  std::string name = uniqueName("huge");
  auto s = Segment::create(name, size_t{1} << 44);  // 16 TiB
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.status().message().find("no room in /dev/shm"), std::string::npos)
      << s.status().message();
  EXPECT_FALSE(Segment::open(name, 1).isOk());
}

unsigned char pattern(int msg, size_t i) { return static_cast<unsigned char>(msg * 31 + i * 7); }

// A segment holding two shared doorbells (the sender's, the receiver's) and
// one connection ring, created by the receiver; the sender (a forked child)
// maps it again by name.
struct SharedRing {
  static constexpr size_t kBellBytes = 2 * 64;
  SharedRing(const char* what, int slots, size_t slotBytes, bool crossMemoryAttach = false,
             size_t minRefBytes = 0)
      : name(uniqueName(what)), bytes(kBellBytes + LocalConnection::ringBytes(slots, slotBytes)) {
    auto s = Segment::create(name, bytes);
    EXPECT_TRUE(s.isOk()) << s.status().message();
    if (!s.isOk()) return;
    seg = std::move(s).value();
    auto* base = static_cast<unsigned char*>(seg->data());
    senderBell = new (base) Doorbell(/*shared=*/true);
    receiverBell = new (base + 64) Doorbell(/*shared=*/true);
    receiver = std::make_unique<LocalConnection>(base + kBellBytes, /*create=*/true, slots,
                                                 slotBytes, crossMemoryAttach, minRefBytes);
    receiver->setDoorbells(senderBell, receiverBell);
  }
  // The sender's side, as a forked child makes it (its own mapping of the
  // segment): `conn` null if the segment cannot be opened.
  struct Sender {
    std::unique_ptr<Segment> seg;
    std::unique_ptr<LocalConnection> conn;
    Doorbell* bell = nullptr;  // the sender's doorbell
  };
  Sender openSender(int slots, size_t slotBytes, bool crossMemoryAttach = false,
                    size_t minRefBytes = 0) const {
    Sender out;
    auto mine = Segment::open(name, bytes);
    if (!mine.isOk()) return out;
    out.seg = std::move(mine).value();
    auto* b = static_cast<unsigned char*>(out.seg->data());
    out.conn = std::make_unique<LocalConnection>(b + kBellBytes, /*create=*/false, slots, slotBytes,
                                                 crossMemoryAttach, minRefBytes);
    out.bell = reinterpret_cast<Doorbell*>(b);
    out.conn->setDoorbells(out.bell, reinterpret_cast<Doorbell*>(b + 64));
    return out;
  }
  // The receiver's next message (its length in `len`), waiting for it.
  const void* nextMessage(size_t* len) const {
    for (;;) {
      uint32_t seen = receiverBell->value();
      if (const void* msg = receiver->receiver().tryPeek(len); msg != nullptr) return msg;
      receiverBell->wait(seen, 1000);
    }
  }
  std::string name;
  size_t bytes;
  std::unique_ptr<Segment> seg;
  Doorbell* senderBell = nullptr;
  Doorbell* receiverBell = nullptr;
  std::unique_ptr<LocalConnection> receiver;  // the parent's side
};

// A receiver finds a message by its slot's own line (number, size, mark):
// messages come in order with what was sent, none before it is committed,
// and after reset() (a call that stopped midway) nothing left in a slot
// counts as a new message.
TEST(Ring, ASlotsLineSaysWhatIsInIt) {
  LocalConnection c(4, 64);
  SendPort& out = c.sender();
  RecvPort& in = c.receiver();
  size_t bytes = 0;
  // Message `fill`: `size` bytes of `fill`, marked 100 + fill.
  auto send = [&](size_t size, unsigned char fill, bool peekBeforeCommit = false) {
    auto* slot = static_cast<unsigned char*>(out.tryAcquire(16));
    ASSERT_NE(slot, nullptr);
    std::memset(slot, fill, size);
    if (peekBeforeCommit) {
      EXPECT_EQ(in.tryPeek(&bytes), nullptr);  // acquired, not yet committed
    }
    out.commit(size, 100u + fill);
  };
  auto expectNext = [&](size_t size, unsigned char fill) {
    const auto* got = static_cast<const unsigned char*>(in.tryPeek(&bytes));
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(bytes, size);
    EXPECT_EQ(in.peekedMark(), 100u + fill);
    EXPECT_EQ(std::vector<unsigned char>(got, got + size), std::vector<unsigned char>(size, fill));
  };
  EXPECT_EQ(in.tryPeek(&bytes), nullptr);
  send(8, 10, /*peekBeforeCommit=*/true);
  send(9, 11);
  send(10, 12);
  expectNext(8, 10);
  in.release();
  expectNext(9, 11);
  c.reset();  // messages 11 and 12 are still in their slots
  EXPECT_EQ(in.tryPeek(&bytes), nullptr);
  send(5, 77);
  expectNext(5, 77);
  in.release();
  EXPECT_EQ(in.tryPeek(&bytes), nullptr);
}

TEST(Shm, RingBetweenProcessesWithBackpressure) {
  constexpr int kSlots = 2, kMessages = 400;
  constexpr size_t kSlotBytes = 4096;
  SharedRing shared("ring", kSlots, kSlotBytes);
  ASSERT_NE(shared.seg, nullptr);
  const std::string& name = shared.name;
  const size_t bytes = shared.bytes;
  LocalConnection& receiver = *shared.receiver;

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The sender: its own mapping and its own view of the same ring.
    SharedRing::Sender side = shared.openSender(kSlots, kSlotBytes);
    if (side.conn == nullptr) ::_exit(10);
    LocalConnection& sender = *side.conn;
    Doorbell* sb = side.bell;
    if (sender.sender().supportsRefs()) ::_exit(11);
    for (int m = 0; m < kMessages; ++m) {
      size_t len = 1 + static_cast<size_t>(m * 37) % kSlotBytes;
      void* slot;
      for (;;) {
        uint32_t seen = sb->value();
        if ((slot = sender.sender().tryAcquire(len)) != nullptr) break;
        sb->wait(seen, 1000);
      }
      for (size_t i = 0; i < len; ++i) static_cast<unsigned char*>(slot)[i] = pattern(m, i);
      sender.sender().commit(len, static_cast<uint32_t>(m) * 0x01010101u);
    }
    ::_exit(0);
  }
  for (int m = 0; m < kMessages; ++m) {
    size_t len = 0;
    const void* msg = shared.nextMessage(&len);
    ASSERT_EQ(len, 1 + static_cast<size_t>(m * 37) % kSlotBytes) << m;
    ASSERT_EQ(receiver.receiver().peekedMark(), static_cast<uint32_t>(m) * 0x01010101u) << m;
    for (size_t i = 0; i < len; ++i)
      ASSERT_EQ(static_cast<const unsigned char*>(msg)[i], pattern(m, i)) << m << " " << i;
    if (m == 10) shared.seg->unlink();  // both sides mapped long ago
    receiver.receiver().release();
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(Segment::open(name, bytes).isOk());
}

// With cross-memory attach, a message of at least minRefBytes travels as a
// reference to the sender's memory: the receiver sees peekedRemote() and
// copies it straight from the other process (any part, to any place); the
// sender keeps its buffer until drained(). A reference whose process is gone
// is an error, not a crash.
TEST(Shm, ReferencesAcrossProcessesAreFetchedFromTheSender) {
  constexpr int kSlots = 2, kMessages = 60;
  constexpr size_t kSlotBytes = 8192, kMinRef = 1024;
  SharedRing shared("refs", kSlots, kSlotBytes, /*crossMemoryAttach=*/true, kMinRef);
  ASSERT_NE(shared.seg, nullptr);
  LocalConnection& receiver = *shared.receiver;
  auto length = [](int m) { return 1 + static_cast<size_t>(m * 997) % kSlotBytes; };

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SharedRing::Sender side = shared.openSender(kSlots, kSlotBytes, true, kMinRef);
    if (side.conn == nullptr) ::_exit(10);
    LocalConnection& sender = *side.conn;
    Doorbell* sb = side.bell;
    SendPort& out = sender.sender();
    if (!out.supportsRefs() || out.minRefBytes() != kMinRef || !out.refsForCopiesOnly())
      ::_exit(11);
    std::vector<unsigned char> buffer(kSlotBytes);
    // Waits give up after 20 s, so a failing parent does not leave us behind.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto wait = [&](uint32_t seen) {
      if (std::chrono::steady_clock::now() > deadline) ::_exit(12);
      sb->wait(seen, 100);
    };
    bool lent = false;  // the buffer is referenced by a message in flight
    for (int m = 0; m < kMessages; ++m) {
      size_t len = length(m);
      bool byRef = len >= kMinRef;
      // A referenced buffer may change only once the receiver let go of it.
      while (lent && !out.drained()) wait(sb->value());
      for (size_t i = 0; i < len; ++i) buffer[i] = pattern(m, i);
      for (;;) {
        uint32_t seen = sb->value();
        if (byRef && out.tryPostRef(buffer.data(), len, static_cast<uint32_t>(m))) break;
        if (!byRef) {
          if (void* slot = out.tryAcquire(len); slot != nullptr) {
            std::memcpy(slot, buffer.data(), len);
            out.commit(len, static_cast<uint32_t>(m));
            break;
          }
        }
        wait(seen);
      }
      lent = byRef;
    }
    // Once all was read, a last reference, then exit without waiting for it.
    while (!out.drained()) wait(sb->value());
    while (!out.tryPostRef(buffer.data(), kMinRef, 0)) wait(sb->value());
    ::_exit(0);
  }
  RecvPort& in = receiver.receiver();
  std::vector<unsigned char> got(kSlotBytes);
  int remote = 0;
  for (int m = 0; m < kMessages; ++m) {
    size_t len = 0;
    const void* msg = shared.nextMessage(&len);
    ASSERT_EQ(len, length(m)) << m;
    ASSERT_EQ(in.peekedRemote(), len >= kMinRef) << m;
    ASSERT_EQ(in.peekedMark(), static_cast<uint32_t>(m)) << m;
    if (in.peekedRemote()) {
      ++remote;
      // In two parts, the second first: any offset, any destination.
      size_t half = len / 2;
      Status part = in.fetch(got.data() + half, half, len - half);
      ASSERT_TRUE(part.isOk()) << m << ": " << part.message();
      ASSERT_TRUE(in.fetch(got.data(), 0, half).isOk());
    } else {
      std::memcpy(got.data(), msg, len);
    }
    for (size_t i = 0; i < len; ++i) ASSERT_EQ(got[i], pattern(m, i)) << m << " " << i;
    in.release();
  }
  EXPECT_GT(remote, kMessages / 2);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  size_t len = 0;
  ASSERT_NE(in.tryPeek(&len), nullptr);
  ASSERT_TRUE(in.peekedRemote());
  Status gone = in.fetch(got.data(), 0, len);
  EXPECT_EQ(gone.code(), StatusCode::kAborted);
  EXPECT_NE(gone.message().find("cannot read a message posted by reference"), std::string::npos)
      << gone.message();
}

// chorusMemAlloc's memory (shared_buffers.h): found by any address inside,
// freed once, mapped by a peer read-only and kept for reuse.
TEST(SharedBuffers, AllocateFindRelease) {
  EXPECT_EQ(shared_buffers::allocate(0).status().code(), StatusCode::kInvalidArgument);
  size_t before = shared_buffers::live();
  auto a = shared_buffers::allocate(10000);
  ASSERT_TRUE(a.isOk()) << a.status().message();
  auto* p = static_cast<unsigned char*>(a.value());
  EXPECT_EQ(p[9999], 0);  // zeroed
  EXPECT_EQ(shared_buffers::live(), before + 1);
  auto r = shared_buffers::find(p + 100, 900);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->base, reinterpret_cast<uintptr_t>(p));
  EXPECT_GE(r->bytes, 10000u);
  EXPECT_NE(r->id, 0u);
  EXPECT_FALSE(shared_buffers::find(p + 100, r->bytes).has_value());  // runs past its end
  std::vector<unsigned char> heap(64);
  EXPECT_FALSE(shared_buffers::find(heap.data(), heap.size()).has_value());
  EXPECT_EQ(shared_buffers::release(heap.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shared_buffers::release(p + 1).code(), StatusCode::kInvalidArgument);
  // A peer's view: this process stands in for one.
  p[5000] = 42;
  std::string why;
  auto m = shared_buffers::PeerMapping::get(::getpid(), *r, &why);
  ASSERT_NE(m, nullptr) << why;
  EXPECT_EQ(*m->at(r->base + 5000), 42);
  p[5001] = 43;  // the same memory, not a copy
  EXPECT_EQ(*m->at(r->base + 5001), 43);
  EXPECT_EQ(shared_buffers::PeerMapping::get(::getpid(), *r, &why), m);  // kept
  ASSERT_TRUE(shared_buffers::release(p).isOk());
  EXPECT_EQ(shared_buffers::release(p).code(), StatusCode::kInvalidArgument);  // twice
  EXPECT_EQ(*m->at(r->base + 5000), 42);  // the peer's mapping outlives the free
  auto b = shared_buffers::allocate(10000);
  ASSERT_TRUE(b.isOk());
  auto rb = shared_buffers::find(b.value(), 1);
  ASSERT_TRUE(rb.has_value());
  EXPECT_NE(rb->id, r->id);  // a new region is never taken for the old one
  ASSERT_TRUE(shared_buffers::release(b.value()).isOk());
  // A descriptor that names no such file is refused, not mapped.
  SharedRegion bogus = *r;
  bogus.fd = 1 << 20;
  bogus.id = 12345;
  EXPECT_EQ(shared_buffers::PeerMapping::get(::getpid(), bogus, &why), nullptr);
  EXPECT_NE(why.find("cannot open /proc/"), std::string::npos) << why;
}

// A reference into the sender's mappable buffer reaches a receiver in
// another process as memory it reads in place (not remote: no copy, no
// system call), for every message; one outside the region it names falls
// back to cross-memory attach, which fails cleanly once the sender is gone.
TEST(SharedBuffers, ReferencesIntoMappableMemoryAreReadInPlace) {
  constexpr int kSlots = 2, kMessages = 40;
  constexpr size_t kSlotBytes = 4096, kBuffer = 1 << 20;
  SharedRing shared("mapped", kSlots, kSlotBytes, /*crossMemoryAttach=*/true, kSlotBytes);
  ASSERT_NE(shared.seg, nullptr);
  LocalConnection& receiver = *shared.receiver;
  auto offset = [](int m) { return static_cast<size_t>(m) * 20011 % (kBuffer - kSlotBytes); };
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SharedRing::Sender side = shared.openSender(kSlots, kSlotBytes, true, kSlotBytes);
    if (side.conn == nullptr) ::_exit(10);
    LocalConnection& sender = *side.conn;
    Doorbell* sb = side.bell;
    SendPort& out = sender.sender();
    if (!out.supportsSharedRefs()) ::_exit(11);
    auto buf = shared_buffers::allocate(kBuffer);
    if (!buf.isOk()) ::_exit(12);
    auto* data = static_cast<unsigned char*>(buf.value());
    for (size_t i = 0; i < kBuffer; ++i) data[i] = static_cast<unsigned char>(i * 7 + 1);
    SharedRegion region = *shared_buffers::find(data, kBuffer);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int m = 0; m <= kMessages; ++m) {
      // Message kMessages claims to lie in the region but does not.
      const unsigned char* at = m < kMessages ? data + offset(m) : data + kBuffer;
      for (;;) {
        uint32_t seen = sb->value();
        if (out.tryPostRef(at, 1 + static_cast<size_t>(m) * 97, 0, &region)) break;
        if (std::chrono::steady_clock::now() > deadline) ::_exit(13);
        sb->wait(seen, 100);
      }
    }
    while (!out.drained()) {
      if (std::chrono::steady_clock::now() > deadline) ::_exit(14);
      sb->wait(sb->value(), 100);
    }
    ::_exit(0);
  }
  RecvPort& in = receiver.receiver();
  for (int m = 0; m <= kMessages; ++m) {
    size_t len = 0;
    const void* msg = shared.nextMessage(&len);
    ASSERT_EQ(len, 1 + static_cast<size_t>(m) * 97) << m;
    if (m == kMessages) {
      ASSERT_TRUE(in.peekedRemote());  // outside the region: not mapped
      in.release();
      break;
    }
    ASSERT_FALSE(in.peekedRemote()) << m;
    const auto* got = static_cast<const unsigned char*>(msg);
    for (size_t i = 0; i < len; ++i)
      ASSERT_EQ(got[i], static_cast<unsigned char>((offset(m) + i) * 7 + 1)) << m << " " << i;
    in.release();
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(Shm, ReadPeerMemoryNamesWhatItCouldNotRead) {
  uint64_t word = 0x1234567890abcdefULL, copy = 0;
  ASSERT_TRUE(
      readPeerMemory(::getpid(), reinterpret_cast<uintptr_t>(&word), &copy, sizeof copy, "a word")
          .isOk());
  EXPECT_EQ(copy, word);
  Status bad = readPeerMemory(::getpid(), 8, &copy, sizeof copy, "the probe word");
  EXPECT_EQ(bad.code(), StatusCode::kAborted);
  EXPECT_NE(bad.message().find("cannot read the probe word"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace chorus::runtime
