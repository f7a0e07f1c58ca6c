// Bootstrap over real loopback TCP, ranks as threads: the table, all-gather,
// barrier; a wrong secret and garbage bytes refused while the real ranks
// still join; the wire decoder on every truncation and on random bytes; the
// environment conventions of Chorus, torchrun and OpenMPI.
#include "runtime/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/bootstrap/rendezvous.h"

namespace chorus::runtime {
namespace {

BootstrapConfig config(int rank, int n, int port, std::string secret = "s3cret") {
  BootstrapConfig c;
  c.rank = rank;
  c.nranks = n;
  c.rootPort = port;
  c.secret = std::move(secret);
  c.timeoutMs = 20000;
  return c;
}

// Found by bench/fault_inject.sh: a rank that never joins (or leaves during
// an all-gather) made the others fail with "timed out" or "the root closed
// its connection"; the root now tells them which rank it was.
TEST(Bootstrap, TheOthersLearnWhichRankNeverJoinedOrLeft) {
  const int n = 3;
  BootstrapConfig rc = config(0, n, 0);
  rc.timeoutMs = 1000;
  auto root = Bootstrap::listen(rc);
  ASSERT_TRUE(root.isOk()) << root.status().message();
  const int port = root.value()->rootPort();
  Status one;
  std::thread t([&] {
    BootstrapConfig c = config(1, n, port);
    c.timeoutMs = 1000;
    auto b = Bootstrap::connect(c);  // rank 2 never comes
    one = b.isOk() ? Status::ok() : b.status();
  });
  Status st = root.value()->accept();
  t.join();
  EXPECT_NE(st.message().find("ranks 2 did not join"), std::string::npos) << st.message();
  EXPECT_NE(one.message().find("the root (rank 0) gave up: bootstrap: ranks 2 did not join"),
            std::string::npos)
      << one.message();

  // All joined; rank 2 leaves instead of taking part in an all-gather.
  auto root2 = Bootstrap::listen(config(0, n, 0));
  ASSERT_TRUE(root2.isOk());
  const int port2 = root2.value()->rootPort();
  Status gathered;
  std::thread r1([&] {
    auto b = Bootstrap::connect(config(1, n, port2));
    ASSERT_TRUE(b.isOk()) << b.status().message();
    auto all = b.value()->allGather("one");
    gathered = all.isOk() ? Status::ok() : all.status();
  });
  std::thread r2([&] {
    auto b = Bootstrap::connect(config(2, n, port2));
    ASSERT_TRUE(b.isOk()) << b.status().message();
    b.value()->goodbye("rank 2 gave up on purpose");
  });
  ASSERT_TRUE(root2.value()->accept().isOk());
  auto all = root2.value()->allGather("zero");
  r1.join();
  r2.join();
  ASSERT_FALSE(all.isOk());
  EXPECT_NE(all.status().message().find("rank 2 left after an error: rank 2 gave up on purpose"),
            std::string::npos)
      << all.status().message();
  EXPECT_NE(gathered.message().find("rank 0 left after an error: bootstrap: rank 2 left"),
            std::string::npos)
      << gathered.message();
}

// The tree's shape: every rank but 0 hangs under a lower rank, the
// subtrees partition the ranks, and neither depth nor fan-out passes
// ceil(log2 n) (the rounds and connections issue 26 asks for).
TEST(BootstrapTree, ShapeIsABinomialTree) {
  for (int n = 1; n <= 130; ++n) {
    int log2n = 0;
    while ((1 << log2n) < n) ++log2n;
    EXPECT_EQ(treeSubtree(0, n), (std::pair{0, n}));
    EXPECT_EQ(treeParent(0), -1);
    for (int r = 0; r < n; ++r) {
      auto [lo, hi] = treeSubtree(r, n);
      EXPECT_EQ(lo, r);
      EXPECT_LE(hi, n);
      std::vector<int> kids = treeChildren(r, n);
      EXPECT_LE(static_cast<int>(kids.size()), log2n);
      // Its children's subtrees tile the rest of its own.
      int next = r + 1;
      for (int c : kids) {
        EXPECT_EQ(treeParent(c), r);
        EXPECT_EQ(treeSubtree(c, n).first, next);
        next = treeSubtree(c, n).second;
      }
      EXPECT_EQ(next, hi) << r << " of " << n;
      int depth = 0;
      for (int a = r; a != 0; a = treeParent(a)) ++depth;
      EXPECT_LE(depth, log2n);
    }
  }
}

// What chorus launch does for the tree: a listening socket per rank, made
// before any rank runs.
struct TreeSockets {
  std::vector<int> fds, ports;
  explicit TreeSockets(int n) {
    for (int r = 0; r < n; ++r) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof a;
      EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
      EXPECT_EQ(::listen(fd, 128), 0);
      EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
      fds.push_back(fd);
      ports.push_back(ntohs(a.sin_port));
    }
  }
  BootstrapConfig config(int r, int timeoutMs = 20000) const {
    BootstrapConfig c;
    c.rank = r;
    c.nranks = static_cast<int>(fds.size());
    c.rootPort = ports[0];
    c.secret = "s3cret";
    c.timeoutMs = timeoutMs;
    c.treePorts = ports;
    c.listenFd = fds[static_cast<size_t>(r)];  // the bootstrap closes it once joined
    return c;
  }
};

TEST(BootstrapTree, RanksJoinAllGatherAndBarrier) {
  for (int n : {1, 2, 5, 13}) {
    TreeSockets socks(n);
    std::vector<std::vector<std::string>> got(static_cast<size_t>(n));
    std::vector<Status> st(static_cast<size_t>(n));
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
      ts.emplace_back([&, r] {
        auto b = Bootstrap::connect(socks.config(r));
        if (!b.isOk()) {
          st[static_cast<size_t>(r)] = b.status();
          return;
        }
        EXPECT_EQ(b.value()->hosts(),
                  std::vector<std::string>(static_cast<size_t>(n), hostIdentity()));
        EXPECT_EQ(b.value()->parent(), treeParent(r));
        auto all = b.value()->allGather("blob" + std::to_string(r * r));
        if (all.isOk()) got[static_cast<size_t>(r)] = all.value();
        st[static_cast<size_t>(r)] = all.isOk() ? b.value()->barrier() : all.status();
        EXPECT_FALSE(b.value()->localAddress().empty());
      });
    for (auto& t : ts) t.join();
    std::vector<std::string> want;
    for (int r = 0; r < n; ++r) want.push_back("blob" + std::to_string(r * r));
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(st[static_cast<size_t>(r)].isOk())
          << r << ": " << st[static_cast<size_t>(r)].message();
      EXPECT_EQ(got[static_cast<size_t>(r)], want) << "rank " << r << " of " << n;
    }
  }
}

// Rank 4 of 6 never comes: its parent (0) names it, and every rank that
// joined learns why from the ranks above it; rank 5 (its child) waits on
// it and names it when its time is up.
TEST(BootstrapTree, AMissingRankIsNamedEverywhere) {
  const int n = 6;
  TreeSockets socks(n);
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) {
    if (r == 4) continue;
    ts.emplace_back([&, r] {
      auto b = Bootstrap::connect(socks.config(r, 1000));
      st[static_cast<size_t>(r)] = b.isOk() ? Status::ok() : b.status();
    });
  }
  for (auto& t : ts) t.join();
  ::close(socks.fds[4]);
  EXPECT_NE(st[0].message().find("ranks 4 did not join"), std::string::npos) << st[0].message();
  for (int r : {1, 2, 3})
    EXPECT_NE(st[static_cast<size_t>(r)].message().find("ranks 4 did not join"), std::string::npos)
        << r << ": " << st[static_cast<size_t>(r)].message();
  EXPECT_FALSE(st[5].isOk());
  EXPECT_NE(st[5].message().find("rank 4"), std::string::npos) << st[5].message();
}

// After joining, rank 2 (an inner rank: 3 hangs under it) leaves after an
// error: every other rank hears of it exactly once, through the tree.
TEST(BootstrapTree, ALossFloodsTheTreeOnce) {
  const int n = 5;  // 0 -> {1, 2, 4}, 2 -> {3}
  TreeSockets socks(n);
  std::vector<std::unique_ptr<Bootstrap>> boots(static_cast<size_t>(n));
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      auto b = Bootstrap::connect(socks.config(r));
      ASSERT_TRUE(b.isOk()) << b.status().message();
      boots[static_cast<size_t>(r)] = std::move(b).value();
    });
  for (auto& t : ts) t.join();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> heard(static_cast<size_t>(n), 0);
  std::vector<std::string> why(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    boots[static_cast<size_t>(r)]->startMonitor([&, r](int lost, const std::string& w) {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_EQ(lost, 2);
      ++heard[static_cast<size_t>(r)];
      why[static_cast<size_t>(r)] = w;
      cv.notify_all();
    });
  boots[2]->goodbye("its calls failed: boom");
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(20),
                          [&] { return heard[0] && heard[1] && heard[3] && heard[4]; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // no echo comes back
  for (int r : {0, 1, 3, 4}) {
    EXPECT_EQ(heard[static_cast<size_t>(r)], 1) << r;
    EXPECT_NE(why[static_cast<size_t>(r)].find("boom"), std::string::npos)
        << why[static_cast<size_t>(r)];
  }
  lock.unlock();
  boots.clear();
}

TEST(Bootstrap, RanksJoinAllGatherAndBarrier) {
  const int n = 4;
  auto root = Bootstrap::listen(config(0, n, 0));
  ASSERT_TRUE(root.isOk()) << root.status().message();
  int port = root.value()->rootPort();
  ASSERT_GT(port, 0);
  std::vector<std::string> got(n);
  std::vector<std::thread> ts;
  std::vector<Status> st(n);
  for (int r = 1; r < n; ++r) {
    ts.emplace_back([&, r] {
      auto b = Bootstrap::connect(config(r, n, port));
      if (!b.isOk()) {
        st[static_cast<size_t>(r)] = b.status();
        return;
      }
      EXPECT_EQ(b.value()->hosts().size(), static_cast<size_t>(n));
      auto all = b.value()->allGather("blob" + std::to_string(r));
      if (all.isOk()) got[static_cast<size_t>(r)] = all.value()[0] + all.value()[3];
      st[static_cast<size_t>(r)] = b.value()->barrier();
    });
  }
  ASSERT_TRUE(root.value()->accept().isOk());
  for (const std::string& h : root.value()->hosts()) EXPECT_EQ(h, hostIdentity());
  auto all = root.value()->allGather("blob0");
  ASSERT_TRUE(all.isOk()) << all.status().message();
  EXPECT_EQ(all.value(), (std::vector<std::string>{"blob0", "blob1", "blob2", "blob3"}));
  EXPECT_TRUE(root.value()->barrier().isOk());
  for (auto& t : ts) t.join();
  for (int r = 1; r < n; ++r) {
    EXPECT_TRUE(st[static_cast<size_t>(r)].isOk()) << st[static_cast<size_t>(r)].message();
    EXPECT_EQ(got[static_cast<size_t>(r)], "blob0blob3");
  }
}

TEST(Bootstrap, WrongSecretAndGarbageAreRefusedRealRanksStillJoin) {
  auto root = Bootstrap::listen(config(0, 2, 0));
  ASSERT_TRUE(root.isOk());
  int port = root.value()->rootPort();
  std::thread intruders([port] {
    // Garbage bytes, then a hello with the wrong secret, then the real rank.
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const char junk[] = "\x10\x00\x00\x00GET / HTTP/1.1\r\n";
    ASSERT_GT(::send(fd, junk, sizeof junk - 1, 0), 0);
    char c;
    EXPECT_EQ(::recv(fd, &c, 1, 0), 0);  // the root hangs up
    ::close(fd);
    BootstrapConfig bad = config(1, 2, port, "guess");
    bad.timeoutMs = 3000;
    auto b = Bootstrap::connect(bad);
    ASSERT_FALSE(b.isOk());
    EXPECT_NE(b.status().message().find("not admitted"), std::string::npos) << b.status().message();
    auto good = Bootstrap::connect(config(1, 2, port));
    EXPECT_TRUE(good.isOk()) << good.status().message();
  });
  Status st = root.value()->accept();
  intruders.join();
  EXPECT_TRUE(st.isOk()) << st.message();
}

// docs/security.md: a flood of strays (silent, huge lengths, garbage, more
// than can wait at once) neither stalls nor breaks the join. The root's
// deadline (3 s) is shorter than one stray's hello allowance (5 s): read
// one after another, a single silent stray would make the real rank miss it.
TEST(Bootstrap, AFloodOfStraysDoesNotDelayTheRealRanks) {
  const int n = 3;
  BootstrapConfig rc = config(0, n, 0);
  rc.timeoutMs = 3000;
  auto root = Bootstrap::listen(rc);
  ASSERT_TRUE(root.isOk());
  const int port = root.value()->rootPort();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> strays;
  for (int i = 0; i < 100; ++i) {  // more than kMaxPendingHellos
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    if (i % 4 == 1) {  // a 2 GiB hello
      const char huge[] = "\x00\x00\x00\x80";
      ASSERT_EQ(::send(fd, huge, 4, 0), 4);
    } else if (i % 4 == 2) {  // half a length, then nothing
      ASSERT_EQ(::send(fd, "\x10\x00", 2, 0), 2);
    } else if (i % 4 == 3) {  // garbage that is a frame but not a hello
      const char junk[] = "\x05\x00\x00\x00hello";
      ASSERT_EQ(::send(fd, junk, sizeof junk - 1, 0), static_cast<ssize_t>(sizeof junk - 1));
    }  // else silent
    strays.push_back(fd);
  }
  std::vector<Status> st(n);
  std::vector<std::thread> ranks;
  for (int r = 1; r < n; ++r)
    ranks.emplace_back([&, r] {
      BootstrapConfig c = config(r, n, port);
      c.timeoutMs = 3000;
      auto b = Bootstrap::connect(c);
      st[static_cast<size_t>(r)] = b.isOk() ? Status::ok() : b.status();
    });
  Status joined = root.value()->accept();
  for (auto& t : ranks) t.join();
  EXPECT_TRUE(joined.isOk()) << joined.message();
  for (int r = 1; r < n; ++r)
    EXPECT_TRUE(st[static_cast<size_t>(r)].isOk()) << st[static_cast<size_t>(r)].message();
  // Once joined, the root listens no more: a late stray is refused by the kernel.
  int late = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_NE(::connect(late, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::close(late);
  for (int fd : strays) ::close(fd);
}

TEST(Bootstrap, MissingRankTimesOut) {
  BootstrapConfig c = config(0, 3, 0);
  c.timeoutMs = 300;
  auto b = Bootstrap::connect(c);
  ASSERT_FALSE(b.isOk());
  EXPECT_EQ(b.status().code(), StatusCode::kTimeout);
  EXPECT_NE(b.status().message().find("ranks 1 2 did not join"), std::string::npos)
      << b.status().message();
}

TEST(BootstrapWire, HelloRoundTripAndEveryTruncationRejected) {
  wire::Hello h{"secret", 3, 8, "host/boot"};
  std::string bytes = wire::encodeHello(h);
  auto back = wire::decodeHello(bytes);
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back.value().rank, 3u);
  EXPECT_EQ(back.value().host, "host/boot");
  for (size_t len = 0; len < bytes.size(); ++len)
    EXPECT_FALSE(wire::decodeHello(bytes.substr(0, len)).isOk()) << len;
  EXPECT_FALSE(wire::decodeHello(bytes + "x").isOk());
  EXPECT_FALSE(wire::decodeHello(wire::encodeHello({"s", 8, 8, "h"})).isOk());  // rank >= nranks
  auto blobs = wire::decodeBlobs(wire::encodeBlobs({"a", "", "ccc"}), 3);
  ASSERT_TRUE(blobs.isOk());
  EXPECT_EQ(blobs.value()[2], "ccc");
  EXPECT_FALSE(wire::decodeBlobs(wire::encodeBlobs({"a"}), 2).isOk());
}

TEST(BootstrapWire, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  std::string valid = wire::encodeHello({"secret", 1, 4, "h"});
  for (int i = 0; i < 20000; ++i) {
    std::string b = valid;
    // Flip, insert or cut a few bytes of a valid message, or pure noise.
    if (i % 4 == 0) {
      b.assign(rng() % 64, '\0');
      for (char& c : b) c = static_cast<char>(rng());
    } else {
      for (int k = 0; k < 1 + i % 3; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    }
    (void)wire::decodeHello(b);
    (void)wire::decodeBlobs(b, 3);
  }
}

TEST(BootstrapEnvironment, ChorusTorchrunAndOpenMpiConventions) {
  for (const char* v : {"CHORUS_RANK", "CHORUS_WORLD_SIZE", "CHORUS_ROOT", "CHORUS_SECRET",
                        "CHORUS_ROOT_FILE", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"})
    unsetenv(v);
  EXPECT_EQ(bootstrapConfigFromEnvironment().status().code(), StatusCode::kNotFound);

  setenv("CHORUS_RANK", "2", 1);
  setenv("CHORUS_WORLD_SIZE", "4", 1);
  setenv("CHORUS_ROOT", "10.0.0.1:29500", 1);
  setenv("CHORUS_SECRET", "abc", 1);
  auto c = bootstrapConfigFromEnvironment();
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c.value().rank, 2);
  EXPECT_EQ(c.value().nranks, 4);
  EXPECT_EQ(c.value().rootHost, "10.0.0.1");
  EXPECT_EQ(c.value().rootPort, 29500);
  EXPECT_EQ(c.value().secret, "abc");
  setenv("CHORUS_RANK", "4", 1);
  EXPECT_NE(bootstrapConfigFromEnvironment().status().message().find("CHORUS_RANK='4'"),
            std::string::npos);
  unsetenv("CHORUS_RANK");
  unsetenv("CHORUS_WORLD_SIZE");
  unsetenv("CHORUS_ROOT");
  unsetenv("CHORUS_SECRET");

  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  EXPECT_NE(bootstrapConfigFromEnvironment().status().message().find("no root address"),
            std::string::npos);
  setenv("MASTER_ADDR", "localhost", 1);
  setenv("MASTER_PORT", "1234", 1);
  c = bootstrapConfigFromEnvironment();
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(c.value().rootHost, "localhost");
  EXPECT_EQ(c.value().rootPort, 1234);
  EXPECT_EQ(c.value().secret, "addr:localhost:1234");
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(v);

  std::string file = ::testing::TempDir() + "chorus_root";
  std::ofstream(file) << "127.0.0.1:4321\n";
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  setenv("CHORUS_ROOT_FILE", file.c_str(), 1);
  c = bootstrapConfigFromEnvironment();
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c.value().nranks, 3);
  EXPECT_EQ(c.value().rootPort, 4321);
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "CHORUS_ROOT_FILE"})
    unsetenv(v);

  // The tree (chorus launch): every rank's port and this rank's socket.
  setenv("CHORUS_RANK", "1", 1);
  setenv("CHORUS_WORLD_SIZE", "3", 1);
  setenv("CHORUS_ROOT", "127.0.0.1:4000", 1);
  TreeSockets socks(1);
  const std::string fd = std::to_string(socks.fds[0]);
  setenv("CHORUS_BOOTSTRAP_PORTS", "4000,4001,4002", 1);
  EXPECT_NE(bootstrapConfigFromEnvironment().status().message().find("not CHORUS_BOOTSTRAP_FD"),
            std::string::npos);
  setenv("CHORUS_BOOTSTRAP_FD", fd.c_str(), 1);
  c = bootstrapConfigFromEnvironment();
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c.value().treePorts, (std::vector<int>{4000, 4001, 4002}));
  EXPECT_EQ(c.value().listenFd, socks.fds[0]);
  setenv("CHORUS_BOOTSTRAP_PORTS", "4000,4001", 1);
  EXPECT_NE(bootstrapConfigFromEnvironment().status().message().find("lists 2 ports for 3 ranks"),
            std::string::npos);
  setenv("CHORUS_BOOTSTRAP_PORTS", "4000,x,4002", 1);
  EXPECT_NE(bootstrapConfigFromEnvironment().status().message().find("CHORUS_BOOTSTRAP_PORTS='x'"),
            std::string::npos);
  setenv("CHORUS_BOOTSTRAP_PORTS", "4000,4001,4002", 1);
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  setenv("CHORUS_BOOTSTRAP_FD", std::to_string(pipeFds[0]).c_str(), 1);  // not a socket
  EXPECT_NE(bootstrapConfigFromEnvironment().status().message().find("not an open stream socket"),
            std::string::npos);
  ::close(pipeFds[0]);
  ::close(pipeFds[1]);
  ::close(socks.fds[0]);
  for (const char* v : {"CHORUS_RANK", "CHORUS_WORLD_SIZE", "CHORUS_ROOT", "CHORUS_BOOTSTRAP_PORTS",
                        "CHORUS_BOOTSTRAP_FD"})
    unsetenv(v);
}

TEST(BootstrapEnvironment, SlurmStepsTasks) {
  const char* slurmVars[] = {"SLURM_PROCID",        "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS",
                             "SLURM_STEP_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID",
                             "SLURM_LOCALID",       "CHORUS_ROOT",  "MASTER_ADDR",
                             "MASTER_PORT"};
  for (const char* v : slurmVars) unsetenv(v);
  // A batch script's shell: task 0 of the job, but no step.
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_JOB_ID", "123456", 1);
  EXPECT_EQ(bootstrapConfigFromEnvironment().status().code(), StatusCode::kNotFound);
  // srun --pty bash: a step of one task.
  setenv("SLURM_STEP_NODELIST", "gpu[07-08]", 1);
  setenv("SLURM_STEP_NUM_TASKS", "1", 1);
  EXPECT_EQ(bootstrapConfigFromEnvironment().status().code(), StatusCode::kNotFound);
  // srun -n 4: task 2 of a step on gpu07 and gpu08.
  setenv("SLURM_STEP_NUM_TASKS", "4", 1);
  setenv("SLURM_PROCID", "2", 1);
  setenv("SLURM_STEP_ID", "3", 1);
  setenv("SLURM_LOCALID", "0", 1);
  auto c = bootstrapConfigFromEnvironment();
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c.value().rank, 2);
  EXPECT_EQ(c.value().nranks, 4);  // the step's, not the job's 8
  EXPECT_EQ(c.value().rootHost, "gpu07");
  EXPECT_EQ(c.value().rootPort, kSlurmFirstPort + (123456 * 16 + 3) % kSlurmPorts);
  EXPECT_EQ(c.value().rootPort, slurmRootPort(123456, 3));
  // Another step of the job: another port.
  setenv("SLURM_STEP_ID", "4", 1);
  EXPECT_NE(bootstrapConfigFromEnvironment().value().rootPort, c.value().rootPort);
  // CHORUS_ROOT (or torchrun's MASTER_ADDR/PORT) overrides the derived root.
  setenv("CHORUS_ROOT", "10.0.0.9:31000", 1);
  c = bootstrapConfigFromEnvironment();
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(c.value().rootHost, "10.0.0.9");
  EXPECT_EQ(c.value().rootPort, 31000);
  unsetenv("CHORUS_ROOT");
  // Errors name the variable.
  setenv("SLURM_PROCID", "4", 1);
  EXPECT_NE(bootstrapConfigFromEnvironment().status().message().find("SLURM_PROCID='4'"),
            std::string::npos);
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_STEP_NODELIST", "gpu[07-08", 1);
  EXPECT_NE(bootstrapConfigFromEnvironment().status().message().find("SLURM_STEP_NODELIST"),
            std::string::npos);
  setenv("SLURM_STEP_NODELIST", "gpu1", 1);
  unsetenv("SLURM_JOB_ID");
  EXPECT_NE(bootstrapConfigFromEnvironment().status().message().find("CHORUS_ROOT"),
            std::string::npos);
  for (const char* v : slurmVars) unsetenv(v);
}

TEST(BootstrapEnvironment, FirstSlurmHost) {
  EXPECT_EQ(firstSlurmHost("node01").value(), "node01");
  EXPECT_EQ(firstSlurmHost("node[01-04,07],gpu3").value(), "node01");
  EXPECT_EQ(firstSlurmHost("gpu3,node[01-04]").value(), "gpu3");
  EXPECT_EQ(firstSlurmHost("node[7,9-10]").value(), "node7");
  EXPECT_EQ(firstSlurmHost("rack[2-3]-n[005-006]").value(), "rack2-n005");
  EXPECT_EQ(firstSlurmHost("a.example.org").value(), "a.example.org");
  for (const char* bad : {"", ",node1", "node[", "node[-3]", "node]1", "node[a-b]"})
    EXPECT_FALSE(firstSlurmHost(bad).isOk()) << bad;
}

TEST(BootstrapWire, RootIdRoundTrip) {
  auto c = decodeRootId(encodeRootId("127.0.0.1", 4000, "k3y"));
  ASSERT_TRUE(c.isOk());
  EXPECT_EQ(c.value().rootHost, "127.0.0.1");
  EXPECT_EQ(c.value().rootPort, 4000);
  EXPECT_EQ(c.value().secret, "k3y");
  EXPECT_FALSE(decodeRootId("chorus-local:1").isOk());
  EXPECT_FALSE(decodeRootId("chorus-tcp:host:notaport:k").isOk());
}

// Ranks meet at chorusGetUniqueId's root: all in this process → "threads".
TEST(Rendezvous, RanksOfOneProcessAreToldThreads) {
  auto id = startRendezvousRoot(20000);
  ASSERT_TRUE(id.isOk()) << id.status().message();
  EXPECT_EQ(id.value().rfind("chorus-id:", 0), 0u);
  const int n = 3;
  std::vector<Status> st(n);
  std::vector<int> threads(n, -1);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      auto m = meetAtRoot(id.value(), r, n, 20000);
      st[static_cast<size_t>(r)] = m.status();
      if (m.isOk()) threads[static_cast<size_t>(r)] = m.value().threads ? 1 : 0;
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(st[static_cast<size_t>(r)].isOk()) << st[static_cast<size_t>(r)].message();
    EXPECT_EQ(threads[static_cast<size_t>(r)], 1);
  }
}

// A wrong secret, a mismatched world size and a rank twice are refused with
// the reason; the real ranks still meet.
TEST(Rendezvous, IntrudersAreRefusedWithTheReason) {
  auto id = startRendezvousRoot(20000);
  ASSERT_TRUE(id.isOk());
  std::string wrong = id.value();
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  auto guess = meetAtRoot(wrong, 1, 2, 5000);
  ASSERT_FALSE(guess.isOk());
  EXPECT_NE(guess.status().message().find("wrong secret"), std::string::npos)
      << guess.status().message();
  Status first, twice, sizes;
  std::thread rank1([&] { first = meetAtRoot(id.value(), 1, 2, 20000).status(); });
  // Wait until rank 1 is in, so that the next two are the intruders.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  twice = meetAtRoot(id.value(), 1, 2, 5000).status();
  sizes = meetAtRoot(id.value(), 0, 3, 5000).status();
  auto rank0 = meetAtRoot(id.value(), 0, 2, 20000);
  rank1.join();
  EXPECT_TRUE(rank0.isOk()) << rank0.status().message();
  EXPECT_TRUE(first.isOk()) << first.message();
  EXPECT_NE(twice.message().find("rank 1 joined this communicator twice"), std::string::npos)
      << twice.message();
  EXPECT_NE(sizes.message().find("says the communicator has 3 ranks, rank 1 said 2"),
            std::string::npos)
      << sizes.message();
}

TEST(Rendezvous, ARankThatNeverComesTimesOut) {
  auto id = startRendezvousRoot(20000);
  ASSERT_TRUE(id.isOk());
  auto m = meetAtRoot(id.value(), 0, 2, 300);
  ASSERT_FALSE(m.isOk());
  EXPECT_EQ(m.status().code(), StatusCode::kTimeout) << m.status().message();
  EXPECT_FALSE(meetAtRoot("chorus-id:127.0.0.1:x:y", 0, 2, 300).isOk());
  EXPECT_FALSE(meetAtRoot("chorus-tcp:127.0.0.1:1:y", 0, 2, 300).isOk());
}

TEST(RendezvousWire, VerdictRoundTripAndEveryTruncationRejected) {
  std::string bytes = wire::encodeVerdict({"processes", "10.0.0.1:4000"});
  auto v = wire::decodeVerdict(bytes);
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(v.value().text, "10.0.0.1:4000");
  for (size_t len = 0; len < bytes.size(); ++len)
    EXPECT_FALSE(wire::decodeVerdict(bytes.substr(0, len)).isOk()) << len;
  EXPECT_FALSE(wire::decodeVerdict(wire::encodeVerdict({"maybe", ""})).isOk());
}

}  // namespace
}  // namespace chorus::runtime
