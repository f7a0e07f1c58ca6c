// Shared-memory segments and connection rings between two real processes:
// a forked sender streams messages of every size through 2 slots
// (backpressure both ways, shared futex doorbells); the names are unlinked
// as soon as both sides have mapped them, and nothing is left behind.
#include "runtime/shm.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "runtime/local_transport.h"

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

TEST(Shm, RingBetweenProcessesWithBackpressure) {
  constexpr int kSlots = 2, kMessages = 400;
  constexpr size_t kSlotBytes = 4096;
  std::string name = uniqueName("ring");
  size_t bellBytes = 2 * 64;
  size_t bytes = bellBytes + LocalConnection::ringBytes(kSlots, kSlotBytes);
  auto seg = Segment::create(name, bytes);
  ASSERT_TRUE(seg.isOk()) << seg.status().message();
  auto* base = static_cast<unsigned char*>(seg.value()->data());
  auto* senderBell = new (base) Doorbell(/*shared=*/true);
  auto* receiverBell = new (base + 64) Doorbell(/*shared=*/true);
  LocalConnection receiver(base + bellBytes, /*create=*/true, kSlots, kSlotBytes);
  receiver.setDoorbells(senderBell, receiverBell);

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The sender: its own mapping and its own view of the same ring.
    auto mine = Segment::open(name, bytes);
    if (!mine.isOk()) ::_exit(10);
    auto* b = static_cast<unsigned char*>(mine.value()->data());
    LocalConnection sender(b + bellBytes, /*create=*/false, kSlots, kSlotBytes);
    auto* sb = reinterpret_cast<Doorbell*>(b);
    sender.setDoorbells(sb, reinterpret_cast<Doorbell*>(b + 64));
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
      sender.sender().commit(len);
    }
    ::_exit(0);
  }
  for (int m = 0; m < kMessages; ++m) {
    size_t len = 0;
    const void* msg;
    for (;;) {
      uint32_t seen = receiverBell->value();
      if ((msg = receiver.receiver().tryPeek(&len)) != nullptr) break;
      receiverBell->wait(seen, 1000);
    }
    ASSERT_EQ(len, 1 + static_cast<size_t>(m * 37) % kSlotBytes) << m;
    for (size_t i = 0; i < len; ++i)
      ASSERT_EQ(static_cast<const unsigned char*>(msg)[i], pattern(m, i)) << m << " " << i;
    if (m == 10) seg.value()->unlink();  // both sides mapped long ago
    receiver.receiver().release();
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(Segment::open(name, bytes).isOk());
}

}  // namespace
}  // namespace chorus::runtime
