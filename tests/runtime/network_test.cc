// The network seam (runtime/transport/network.h) without a communicator:
// ranks as threads meet over a real bootstrap, the Network picks each
// peer's transport from the table, and a ProcessFabric over every pair
// moves a message distinct per (sender, receiver) both ways, over shared
// memory (auto) and over TCP (forced). Also: an unknown transport is
// refused naming the known ones, and a PollerSet drives every poller.
#include "runtime/transport/network.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "runtime/transport/process_fabric.h"

namespace chorus::runtime {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t word(int from, int to, int i) {
  return (uint64_t(from) << 40) | (uint64_t(to) << 20) | uint64_t(i);
}

// One rank: its network and an all-pairs fabric; sends kWords words to
// every peer, receives theirs and checks each word. Returns what failed.
std::string runRank(Bootstrap& boot, const std::string& prefix, const std::string& transport,
                    std::string* links) {
  constexpr int kWords = 512;
  const int me = boot.rank(), n = boot.nranks();
  NetworkOptions o;
  o.transport = transport;
  o.timeoutMs = 20000;
  auto net = Network::create(boot, prefix, o, [](int, const std::string&) {});
  if (!net.isOk()) return net.status().message();
  for (int r = 0; r < n; ++r) (*links += r == 0 ? "" : ",") += net.value()->link(r).name;
  auto fabric = ProcessFabric::create(ProcessFabric::allPairs(n, me), me, kWords * 8, 2,
                                      prefix + "-f", 1, boot, *net.value());
  if (!fabric.isOk()) return fabric.status().message();
  Poller* poller = net.value()->poller();
  if (poller != nullptr) poller->enter();
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::string failed;
  for (int p = 0; p < n && failed.empty(); ++p) {
    if (p == me) continue;
    SendPort& s = fabric.value()->find(0, me, p)->sender();
    void* slot = nullptr;
    while ((slot = s.tryAcquire(kWords * 8)) == nullptr && Clock::now() < deadline)
      if (poller == nullptr || !poller->poll()) std::this_thread::yield();
    if (slot == nullptr) return "no slot to rank " + std::to_string(p);
    for (int i = 0; i < kWords; ++i) {
      uint64_t w = word(me, p, i);
      std::memcpy(static_cast<char*>(slot) + 8 * i, &w, 8);
    }
    s.commit(kWords * 8, static_cast<uint32_t>(me * 1000 + p));
  }
  for (int p = 0; p < n && failed.empty(); ++p) {
    if (p == me) continue;
    RecvPort& r = fabric.value()->find(0, p, me)->receiver();
    size_t bytes = 0;
    const void* got = nullptr;
    while ((got = r.tryPeek(&bytes)) == nullptr && Clock::now() < deadline)
      if (poller == nullptr || !poller->poll()) std::this_thread::yield();
    if (got == nullptr) return "nothing from rank " + std::to_string(p);
    if (bytes != kWords * 8)
      failed = "from rank " + std::to_string(p) + ": " + std::to_string(bytes) + " bytes";
    if (r.peekedMark() != static_cast<uint32_t>(p * 1000 + me))
      failed = "from rank " + std::to_string(p) + ": mark " + std::to_string(r.peekedMark());
    for (int i = 0; i < kWords && failed.empty(); ++i) {
      uint64_t w = 0;
      std::memcpy(&w, static_cast<const char*>(got) + 8 * i, 8);
      if (w != word(p, me, i))
        failed = "from rank " + std::to_string(p) + ": word " + std::to_string(i) + " wrong";
    }
    r.release();
  }
  // Every rank's sends drained before the fabric goes.
  for (int p = 0; p < n; ++p)
    while (p != me && !fabric.value()->find(0, me, p)->sender().drained() &&
           Clock::now() < deadline)
      if (poller == nullptr || !poller->poll()) std::this_thread::yield();
  if (poller != nullptr) poller->leave(false);
  Status st = boot.barrier();
  if (failed.empty() && !st.isOk()) failed = st.message();
  net.value()->shutdown();
  return failed;
}

// Runs `n` ranks as threads; each rank's failure ("" when none) and the
// transports it chose per peer.
void runRanks(int n, const std::string& transport, std::vector<std::string>* failed,
              std::vector<std::string>* links) {
  failed->assign(static_cast<size_t>(n), "");
  links->assign(static_cast<size_t>(n), "");
  const std::string prefix = "/chorus-nettest-" + std::to_string(::getpid()) + "-" + transport;
  BootstrapConfig c;
  c.nranks = n;
  c.secret = "net";
  c.timeoutMs = 20000;
  auto root = Bootstrap::listen(c);
  ASSERT_TRUE(root.isOk()) << root.status().message();
  const int port = root.value()->rootPort();
  std::vector<std::thread> ts;
  for (int r = 1; r < n; ++r)
    ts.emplace_back([&, r] {
      BootstrapConfig rc = c;
      rc.rank = r;
      rc.rootPort = port;
      auto b = Bootstrap::connect(rc);
      if (!b.isOk()) {
        (*failed)[static_cast<size_t>(r)] = b.status().message();
        return;
      }
      (*failed)[static_cast<size_t>(r)] =
          runRank(*b.value(), prefix, transport, &(*links)[static_cast<size_t>(r)]);
    });
  Status st = root.value()->accept();
  if (st.isOk())
    (*failed)[0] = runRank(*root.value(), prefix, transport, &(*links)[0]);
  else
    (*failed)[0] = st.message();
  for (auto& t : ts) t.join();
}

TEST(Network, SharedMemoryOnOneHostCarriesEveryPairsMessages) {
  std::vector<std::string> failed, links;
  runRanks(3, "auto", &failed, &links);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(failed[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(links[static_cast<size_t>(r)], "shm,shm,shm") << "rank " << r;
  }
}

TEST(Network, ForcedTcpCarriesEveryPairsMessagesAndARankReachesItselfBySharedMemory) {
  std::vector<std::string> failed, links;
  runRanks(3, "tcp", &failed, &links);
  const char* expected[] = {"shm,tcp,tcp", "tcp,shm,tcp", "tcp,tcp,shm"};
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(failed[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(links[static_cast<size_t>(r)], expected[r]) << "rank " << r;
  }
}

TEST(Network, AnUnknownTransportIsRefusedNamingTheKnownOnes) {
  std::vector<std::string> failed, links;
  runRanks(2, "rdma", &failed, &links);
  for (const std::string& f : failed) EXPECT_EQ(f, "CHORUS_TRANSPORT='rdma' is not auto, shm, tcp");
}

class CountingPoller final : public Poller {
 public:
  void enter() override { ++entered; }
  bool poll() override {
    ++polled;
    return moves;
  }
  void leave(bool sleeping) override { left += sleeping ? 10 : 1; }
  int entered = 0, polled = 0, left = 0;
  bool moves = false;
};

TEST(PollerSet, DrivesEveryPollerAndSleepsOnTheDoorbell) {
  CountingPoller a, b;
  b.moves = true;
  PollerSet set({&a, &b});
  set.enter();
  EXPECT_TRUE(set.poll());  // b moved something; a was polled all the same
  b.moves = false;
  EXPECT_FALSE(set.poll());
  EXPECT_FALSE(set.sleep(5));  // neither serves every peer
  set.leave(true);
  set.leave(false);
  for (const CountingPoller* p : {&a, &b}) {
    EXPECT_EQ(p->entered, 1);
    EXPECT_EQ(p->polled, 2);
    EXPECT_EQ(p->left, 11);
  }
}

}  // namespace
}  // namespace chorus::runtime
