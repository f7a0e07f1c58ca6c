// The C API end to end: every collective on every built-in path for world
// sizes 1, 2, 3, 4, 5 and 8, driven from one thread per rank and from one
// thread with a group, with data checked element by element; send/recv;
// explicit algorithm files; and every kind of bad input getting an error
// code and a message instead of a crash or a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "api/convert.h"
#include "chorus/chorus.h"
#include "runtime/exec/check.h"
#include "tests/support/files.h"

namespace chorus::api {
namespace {

using runtime::CollectiveData;

std::vector<chorusComm_t> initAll(int n) {
  std::vector<chorusComm_t> comms(static_cast<size_t>(n));
  EXPECT_EQ(chorusCommInitAll(comms.data(), n, nullptr), chorusSuccess);
  return comms;
}

void destroyAll(const std::vector<chorusComm_t>& comms) {
  for (chorusComm_t c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}

chorusResult_t callOne(CollectiveKind k, const runtime::CallArgs& c, int root, chorusComm_t comm) {
  chorusDataType_t t = toC(c.type);
  chorusRedOp_t op = toC(c.op);
  switch (k) {
    case CollectiveKind::kAllReduce:
      return chorusAllReduce(c.sendbuff, c.recvbuff, c.count, t, op, comm, nullptr);
    case CollectiveKind::kAllGather:
      return chorusAllGather(c.sendbuff, c.recvbuff, c.count, t, comm, nullptr);
    case CollectiveKind::kReduceScatter:
      return chorusReduceScatter(c.sendbuff, c.recvbuff, c.count, t, op, comm, nullptr);
    case CollectiveKind::kAllToAll:
      return chorusAllToAll(c.sendbuff, c.recvbuff, c.count, t, comm, nullptr);
    case CollectiveKind::kBroadcast:
      return chorusBroadcast(c.sendbuff, c.recvbuff, c.count, t, root, comm, nullptr);
    default:
      return chorusReduce(c.sendbuff, c.recvbuff, c.count, t, op, root, comm, nullptr);
  }
}

// Each rank's chorusGetLastError() after the last runThreads().
std::vector<std::string> messages;

// One call per rank from its own thread; returns each rank's result.
std::vector<chorusResult_t> runThreads(const std::vector<chorusComm_t>& comms,
                                       const std::function<chorusResult_t(int)>& f) {
  std::vector<chorusResult_t> res(comms.size(), chorusInternalError);
  messages.assign(comms.size(), "");
  std::vector<std::thread> ts;
  for (size_t r = 0; r < comms.size(); ++r)
    ts.emplace_back([&, r] {
      res[r] = f(static_cast<int>(r));
      messages[r] = chorusGetLastError(nullptr);
    });
  for (auto& t : ts) t.join();
  return res;
}

struct Coll {
  CollectiveKind kind;
  ReduceOp op;
};

TEST(CApi, EveryCollectiveOnWorldSizes1To8BothDrivingStyles) {
  const Coll colls[] = {{CollectiveKind::kAllReduce, ReduceOp::kSum},
                        {CollectiveKind::kAllGather, ReduceOp::kSum},
                        {CollectiveKind::kReduceScatter, ReduceOp::kMax},
                        {CollectiveKind::kAllToAll, ReduceOp::kSum},
                        {CollectiveKind::kBroadcast, ReduceOp::kSum},
                        {CollectiveKind::kReduce, ReduceOp::kAvg}};
  for (int n : {1, 2, 3, 4, 5, 8}) {
    auto comms = initAll(n);
    for (const Coll& c : colls) {
      // Small (halving-doubling for allreduce), larger than one slice of a
      // 16 KiB test slice, and a count no chunking divides.
      for (size_t count : {size_t{24}, size_t{3000}, size_t{8 * 3 * 5 * 7 + 1}}) {
        for (bool inplace : {false, true}) {
          int root = n > 1 ? n - 1 : 0;
          SCOPED_TRACE(std::string(collectiveName(c.kind)) + " n=" + std::to_string(n) +
                       " count=" + std::to_string(count) + (inplace ? " in-place" : ""));
          auto data =
              CollectiveData::make(c.kind, n, root, count, DataType::kFloat32, c.op, inplace);
          ASSERT_TRUE(data.isOk());
          auto res = runThreads(comms, [&](int r) {
            return callOne(c.kind, data.value().calls()[static_cast<size_t>(r)], root,
                           comms[static_cast<size_t>(r)]);
          });
          for (chorusResult_t x : res) ASSERT_EQ(x, chorusSuccess) << messages[0];
          std::string first;
          EXPECT_EQ(data.value().countWrong(&first), 0u) << first;

          // The same call from one thread in a group.
          data.value().reset();
          ASSERT_EQ(chorusGroupStart(), chorusSuccess);
          for (int r = 0; r < n; ++r)
            ASSERT_EQ(callOne(c.kind, data.value().calls()[static_cast<size_t>(r)], root,
                              comms[static_cast<size_t>(r)]),
                      chorusSuccess);
          ASSERT_EQ(chorusGroupEnd(), chorusSuccess) << chorusGetLastError(nullptr);
          EXPECT_EQ(data.value().countWrong(&first), 0u) << first;
        }
      }
    }
    destroyAll(comms);
  }
}

TEST(CApi, InitRankFromThreadsAndQueries) {
  chorusUniqueId id;
  ASSERT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  const int n = 3;
  std::vector<chorusComm_t> comms(n);
  std::vector<std::thread> ts;
  std::vector<chorusResult_t> res(n);
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      res[static_cast<size_t>(r)] = chorusCommInitRank(&comms[static_cast<size_t>(r)], n, id, r);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[static_cast<size_t>(r)], chorusSuccess);
    int count = 0, rank = -1;
    EXPECT_EQ(chorusCommCount(comms[static_cast<size_t>(r)], &count), chorusSuccess);
    EXPECT_EQ(chorusCommUserRank(comms[static_cast<size_t>(r)], &rank), chorusSuccess);
    EXPECT_EQ(count, n);
    EXPECT_EQ(rank, r);
  }
  int version = 0;
  EXPECT_EQ(chorusGetVersion(&version), chorusSuccess);
  EXPECT_EQ(version, CHORUS_VERSION_CODE);
  destroyAll(comms);
}

// One thread inits every rank inside a group and calls an allreduce on each
// before the end (NCCL's single-thread multi-rank init): the ranks meet at
// chorusGroupEnd, which then runs the calls.
TEST(CApi, InitRankInAGroupFromOneThreadThenCallsInTheSameGroup) {
  chorusUniqueId id;
  ASSERT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  const int n = 3, count = 257;
  std::vector<chorusComm_t> comms(n, nullptr);
  std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count)), out = in;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < count; ++i)
      in[static_cast<size_t>(r)][static_cast<size_t>(i)] = r * 1000 + i;
  ASSERT_EQ(chorusGroupStart(), chorusSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(chorusCommInitRank(&comms[static_cast<size_t>(r)], n, id, r), chorusSuccess);
    ASSERT_NE(comms[static_cast<size_t>(r)], nullptr);
  }
  // Not made yet: only the group's calls may use it.
  int count0 = 0;
  EXPECT_EQ(chorusCommCount(comms[0], &count0), chorusInvalidUsage);
  EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("made when the group"),
            std::string::npos);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(
        chorusAllReduce(in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(),
                        count, chorusInt32, chorusSum, comms[static_cast<size_t>(r)], nullptr),
        chorusSuccess);
  ASSERT_EQ(chorusGroupEnd(), chorusSuccess) << chorusGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    int size = 0, rank = -1;
    EXPECT_EQ(chorusCommCount(comms[static_cast<size_t>(r)], &size), chorusSuccess);
    EXPECT_EQ(chorusCommUserRank(comms[static_cast<size_t>(r)], &rank), chorusSuccess);
    EXPECT_EQ(size, n);
    EXPECT_EQ(rank, r);
    for (int i = 0; i < count; ++i)
      ASSERT_EQ(out[static_cast<size_t>(r)][static_cast<size_t>(i)], 3000 + 3 * i)
          << "rank " << r << " element " << i;
  }
  destroyAll(comms);
}

// A call refused inside such a group (here: a bad datatype, checked at the
// end since its communicator is made there) drops the group's calls, but the
// communicators are made; chorusGroupCancel drops the calls too.
TEST(CApi, ARefusedOrCancelledGroupStillMakesItsCommunicators) {
  for (bool cancel : {false, true}) {
    SCOPED_TRACE(cancel ? "chorusGroupCancel" : "a refused call");
    chorusUniqueId id;
    ASSERT_EQ(chorusGetUniqueId(&id), chorusSuccess);
    const int n = 2;
    std::vector<chorusComm_t> comms(n, nullptr);
    std::vector<int32_t> in(8, 1), out(8, -7);
    ASSERT_EQ(chorusGroupStart(), chorusSuccess);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(chorusCommInitRank(&comms[static_cast<size_t>(r)], n, id, r), chorusSuccess);
    ASSERT_EQ(chorusAllReduce(in.data(), out.data(), 8, chorusInt32, chorusSum, comms[0], nullptr),
              chorusSuccess);
    ASSERT_EQ(chorusAllReduce(in.data(), out.data(), 8,
                              cancel ? chorusInt32 : static_cast<chorusDataType_t>(99), chorusSum,
                              comms[1], nullptr),
              chorusSuccess);  // checked at the end
    if (cancel) {
      ASSERT_EQ(chorusGroupCancel(), chorusSuccess);
    } else {
      ASSERT_EQ(chorusGroupEnd(), chorusInvalidArgument);
      EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("none of its 1 other calls ran"),
                std::string::npos)
          << chorusGetLastError(nullptr);
    }
    EXPECT_EQ(out, std::vector<int32_t>(8, -7));  // nothing ran
    for (int r = 0; r < n; ++r) {
      int rank = -1;
      EXPECT_EQ(chorusCommUserRank(comms[static_cast<size_t>(r)], &rank), chorusSuccess);
      EXPECT_EQ(rank, r);
    }
    destroyAll(comms);
  }
  EXPECT_EQ(chorusGroupCancel(), chorusInvalidUsage);  // not in a group
}

TEST(CApi, SendRecvRingInAGroupAndAlone) {
  const int n = 4, count = 1000;
  auto comms = initAll(n);
  std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(count)), in = out;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < count; ++i)
      out[static_cast<size_t>(r)][static_cast<size_t>(i)] = r * 100000 + i;
  auto res = runThreads(comms, [&](int r) {
    chorusGroupStart();
    chorusSend(out[static_cast<size_t>(r)].data(), count, chorusInt32, (r + 1) % n,
               comms[static_cast<size_t>(r)], nullptr);
    chorusRecv(in[static_cast<size_t>(r)].data(), count, chorusInt32, (r + n - 1) % n,
               comms[static_cast<size_t>(r)], nullptr);
    return chorusGroupEnd();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[static_cast<size_t>(r)], chorusSuccess);
    EXPECT_EQ(in[static_cast<size_t>(r)], out[static_cast<size_t>((r + n - 1) % n)]);
  }
  // Mismatched counts: both sides get an error naming both calls.
  res = runThreads({comms[0], comms[1]}, [&](int r) {
    return r == 0 ? chorusSend(out[0].data(), 10, chorusInt32, 1, comms[0], nullptr)
                  : chorusRecv(in[1].data(), 11, chorusInt32, 0, comms[1], nullptr);
  });
  EXPECT_EQ(res[0], chorusInvalidArgument);
  EXPECT_EQ(res[1], chorusInvalidArgument);
  EXPECT_EQ(chorusSend(out[0].data(), 1, chorusInt32, n, comms[0], nullptr), chorusInvalidArgument);
  EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("peer"), std::string::npos);
  destroyAll(comms);
}

TEST(CApi, ExplicitAlgorithmFiles) {
  auto comms = initAll(8);
  chorusAlgoHandle_t h = 0;
  std::string ap4 = std::string(CHORUS_MSCCL_DIR) + "/ap4ll.xml";
  ASSERT_EQ(chorusLoadAlgo(ap4.c_str(), &h, 0), chorusSuccess) << chorusGetLastError(nullptr);
  auto data = CollectiveData::make(CollectiveKind::kAllReduce, 8, -1, 256 * 3, DataType::kBfloat16,
                                   ReduceOp::kSum, true);
  ASSERT_TRUE(data.isOk());
  auto res = runThreads(comms, [&](int r) {
    const auto& c = data.value().calls()[static_cast<size_t>(r)];
    return chorusRunAlgo(c.sendbuff, c.recvbuff, c.count, chorusBfloat16, chorusSum, 0, h,
                         comms[static_cast<size_t>(r)], nullptr);
  });
  for (chorusResult_t x : res) ASSERT_EQ(x, chorusSuccess) << messages[0];
  EXPECT_EQ(data.value().countWrong(), 0u);

  // A count its 256 chunks do not divide, and a communicator of another size.
  res = runThreads(comms, [&](int r) {
    const auto& c = data.value().calls()[static_cast<size_t>(r)];
    return chorusRunAlgo(c.sendbuff, c.recvbuff, 257, chorusBfloat16, chorusSum, 0, h,
                         comms[static_cast<size_t>(r)], nullptr);
  });
  EXPECT_EQ(res[0], chorusInvalidArgument);
  EXPECT_NE(messages[0].find("not a multiple of 256"), std::string::npos) << messages[0];
  auto four = initAll(4);
  res = runThreads(four, [&](int r) {
    const auto& c = data.value().calls()[static_cast<size_t>(r)];
    return chorusRunAlgo(c.sendbuff, c.recvbuff, 256, chorusBfloat16, chorusSum, 0, h,
                         four[static_cast<size_t>(r)], nullptr);
  });
  EXPECT_EQ(res[0], chorusInvalidArgument);
  EXPECT_NE(messages[0].find("for 8 ranks"), std::string::npos) << messages[0];
  EXPECT_EQ(chorusUnloadAlgo(h), chorusSuccess);
  EXPECT_EQ(chorusUnloadAlgo(h), chorusInvalidArgument);

  // The verifier's verdict is quoted for a wrong file.
  std::string bad = std::string(CHORUS_SOURCE_DIR) + "/tests/data/bad/e301_swapped_offsets.xml";
  EXPECT_EQ(chorusLoadAlgo(bad.c_str(), &h, 0), chorusInvalidArgument);
  EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("E301"), std::string::npos);
  EXPECT_EQ(chorusLoadAlgo("/nonexistent.xml", &h, 0), chorusInvalidArgument);
  EXPECT_EQ(chorusLoadBuiltinAlgo("no_such", 4, 0, &h), chorusInvalidArgument);
  destroyAll(four);
  destroyAll(comms);
}

// chorusMemAlloc / chorusMemFree: zeroed, page-aligned memory; what it did
// not hand out (or handed out and took back) is refused with a message.
TEST(CApi, MemAllocAndFree) {
  void* p = nullptr;
  ASSERT_EQ(chorusMemAlloc(&p, 3000), chorusSuccess) << chorusGetLastError(nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(static_cast<unsigned char*>(p)[2999], 0);
  EXPECT_EQ(chorusMemAlloc(nullptr, 8), chorusInvalidArgument);
  EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("ptr is NULL"), std::string::npos);
  void* q = &p;
  EXPECT_EQ(chorusMemAlloc(&q, 0), chorusInvalidArgument);
  EXPECT_EQ(q, nullptr);
  int local = 0;
  EXPECT_EQ(chorusMemFree(&local), chorusInvalidArgument);
  EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("not allocated by chorusMemAlloc"),
            std::string::npos)
      << chorusGetLastError(nullptr);
  EXPECT_EQ(chorusMemFree(p), chorusSuccess);
  EXPECT_EQ(chorusMemFree(p), chorusInvalidArgument);  // twice
  EXPECT_EQ(chorusMemFree(nullptr), chorusSuccess);    // as free(NULL)
}

TEST(CApi, BadArgumentsGetCodesAndMessages) {
  auto comms = initAll(2);
  float buf[8] = {};
  auto lastHas = [](const char* what) {
    return std::string(chorusGetLastError(nullptr)).find(what) != std::string::npos;
  };
  EXPECT_EQ(
      chorusAllReduce(buf, buf, 8, static_cast<chorusDataType_t>(42), chorusSum, comms[0], nullptr),
      chorusInvalidArgument);
  EXPECT_TRUE(lastHas("unknown data type 42"));
  EXPECT_EQ(
      chorusAllReduce(buf, buf, 8, chorusFloat, static_cast<chorusRedOp_t>(9), comms[0], nullptr),
      chorusInvalidArgument);
  EXPECT_TRUE(lastHas("unknown reduction op 9"));
  EXPECT_EQ(chorusAllReduce(buf, buf, 8, chorusFloat, chorusSum, nullptr, nullptr),
            chorusInvalidArgument);
  int stream = 0;
  EXPECT_EQ(chorusAllReduce(buf, buf, 8, chorusFloat, chorusSum, comms[0], &stream),
            chorusInvalidUsage);
  EXPECT_EQ(chorusCommInitAll(nullptr, 2, nullptr), chorusInvalidArgument);
  EXPECT_EQ(chorusGroupEnd(), chorusInvalidUsage);

  // Null buffers, a root outside the communicator, avg on allgather: every
  // rank gets the error, nobody hangs.
  auto res = runThreads(comms, [&](int r) {
    return chorusAllReduce(nullptr, buf, 8, chorusFloat, chorusSum, comms[static_cast<size_t>(r)],
                           nullptr);
  });
  EXPECT_EQ(res[0], chorusInvalidArgument);
  EXPECT_EQ(res[1], chorusInvalidArgument);
  res = runThreads(comms, [&](int r) {
    return chorusBroadcast(buf, buf, 8, chorusFloat, 5, comms[static_cast<size_t>(r)], nullptr);
  });
  EXPECT_EQ(res[0], chorusInvalidArgument);
  EXPECT_NE(messages[1].find("root 5"), std::string::npos) << messages[1];

  // A group whose ranks disagree.
  float other[16] = {};
  res = runThreads(comms, [&](int r) {
    return r == 0 ? chorusAllReduce(buf, buf, 8, chorusFloat, chorusSum, comms[0], nullptr)
                  : chorusAllGather(buf, other, 8, chorusFloat, comms[1], nullptr);
  });
  EXPECT_EQ(res[0], chorusInvalidArgument);
  EXPECT_EQ(res[1], chorusInvalidArgument);
  EXPECT_NE(messages[0].find("does not match across ranks"), std::string::npos) << messages[0];
  // ... after which the communicator still works.
  float a[2] = {1, 2}, b[2] = {10, 20};
  res = runThreads(comms, [&](int r) {
    return chorusAllReduce(r ? b : a, r ? b : a, 2, chorusFloat, chorusSum,
                           comms[static_cast<size_t>(r)], nullptr);
  });
  EXPECT_EQ(res[0], chorusSuccess);
  EXPECT_EQ(a[1], 22.0f);

  // Use after destroy.
  destroyAll(comms);
  EXPECT_EQ(chorusAllReduce(buf, buf, 8, chorusFloat, chorusSum, comms[0], nullptr),
            chorusInvalidArgument);
  EXPECT_TRUE(lastHas("not live"));
  EXPECT_EQ(chorusCommDestroy(comms[0]), chorusInvalidArgument);
  int count = 0;
  EXPECT_EQ(chorusCommCount(comms[1], &count), chorusInvalidArgument);
}

// A devlist asks for GPU ranks: where there are none (or the build has no
// CUDA) that is a clear error, not host ranks in disguise. With a GPU:
// tests/cuda/cuda_test.cc (Cuda.CApi*).
TEST(CApi, DevlistWithoutAGpuIsRefused) {
  std::vector<chorusComm_t> comms(2);
  const int devlist[2] = {0, 0};
  chorusResult_t r = chorusCommInitAll(comms.data(), 2, devlist);
  std::string why = chorusGetLastError(nullptr);
#if defined(CHORUS_WITH_CUDA)
  if (r == chorusSuccess) {
    for (chorusComm_t c : comms) chorusCommDestroy(c);
    GTEST_SKIP() << "this machine has a GPU: the Cuda.CApi tests cover it";
  }
  EXPECT_EQ(r, chorusInvalidUsage);
  EXPECT_NE(why.find("no CUDA device"), std::string::npos) << why;
#else
  EXPECT_EQ(r, chorusInvalidUsage);
  EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
#endif
}

TEST(CApi, MissingRankTimesOutAndAbortUnblocks) {
  setenv("CHORUS_TIMEOUT_S", "1", 1);
  auto comms = initAll(2);
  unsetenv("CHORUS_TIMEOUT_S");
  float buf[4] = {};
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(chorusAllReduce(buf, buf, 4, chorusFloat, chorusSum, comms[0], nullptr), chorusTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("ranks 1 did not call"),
            std::string::npos)
      << chorusGetLastError(nullptr);
  chorusResult_t async = chorusSuccess;
  EXPECT_EQ(chorusCommGetAsyncError(comms[1], &async), chorusSuccess);
  EXPECT_EQ(async, chorusTimeout);
  destroyAll(comms);

  // Abort: rank 0 waits for rank 1, which aborts instead of calling.
  comms = initAll(2);
  std::thread waiter([&] {
    EXPECT_EQ(chorusAllReduce(buf, buf, 4, chorusFloat, chorusSum, comms[0], nullptr),
              chorusRemoteError);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(chorusCommAbort(comms[1]), chorusSuccess);
  waiter.join();
  EXPECT_EQ(chorusAllReduce(buf, buf, 4, chorusFloat, chorusSum, comms[0], nullptr),
            chorusRemoteError);
  EXPECT_EQ(chorusCommDestroy(comms[0]), chorusSuccess);
}

TEST(CApi, ErrorStrings) {
  for (int r = 0; r < chorusNumResults; ++r)
    EXPECT_STRNE(chorusGetErrorString(static_cast<chorusResult_t>(r)), "unknown result code");
  EXPECT_STREQ(chorusGetErrorString(static_cast<chorusResult_t>(99)), "unknown result code");
}

// chorusCommSplit on thread ranks (by parity, higher ranks first), gather
// and scatter with the root-only buffer NULL elsewhere, CuDevice of host
// ranks, and Finalize.
TEST(CApi, SplitGatherScatterOnThreads) {
  const int n = 5;
  auto comms = initAll(n);
  constexpr size_t kLen = 37;
  std::vector<std::vector<int32_t>> mine(n), gathered(n), piece(n);
  std::vector<int32_t> scatterSrc(kLen * n);
  for (size_t j = 0; j < scatterSrc.size(); ++j) scatterSrc[j] = 7 * static_cast<int32_t>(j);
  std::vector<chorusResult_t> results(n * 4, chorusInternalError);
  std::vector<int> halfSize(n), halfRank(n);
  std::vector<int32_t> halfSum(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      auto& m = mine[static_cast<size_t>(r)];
      for (size_t i = 0; i < kLen; ++i) m.push_back(r * 1000 + static_cast<int32_t>(i));
      gathered[static_cast<size_t>(r)].assign(kLen * n, -1);
      piece[static_cast<size_t>(r)].assign(kLen, -1);
      size_t k = static_cast<size_t>(r) * 4;
      results[k] = chorusGather(m.data(), r == 2 ? gathered[2].data() : nullptr, kLen, chorusInt32,
                                2, comms[static_cast<size_t>(r)], nullptr);
      results[k + 1] =
          chorusScatter(r == 0 ? scatterSrc.data() : nullptr, piece[static_cast<size_t>(r)].data(),
                        kLen, chorusInt32, 0, comms[static_cast<size_t>(r)], nullptr);
      chorusComm_t half = nullptr;
      results[k + 2] = chorusCommSplit(comms[static_cast<size_t>(r)],
                                       r == 4 ? CHORUS_SPLIT_NOCOLOR : r % 2, -r, &half);
      if (r == 4) {
        results[k + 3] = half == nullptr ? chorusSuccess : chorusInternalError;
        return;
      }
      int32_t v = r;
      chorusCommCount(half, &halfSize[static_cast<size_t>(r)]);
      chorusCommUserRank(half, &halfRank[static_cast<size_t>(r)]);
      results[k + 3] = chorusAllReduce(&v, &halfSum[static_cast<size_t>(r)], 1, chorusInt32,
                                       chorusSum, half, nullptr);
      chorusCommDestroy(half);
    });
  }
  for (auto& t : ts) t.join();
  for (size_t k = 0; k < results.size(); ++k) EXPECT_EQ(results[k], chorusSuccess) << k;
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < kLen; ++i) {
      EXPECT_EQ(gathered[2][static_cast<size_t>(q) * kLen + i], q * 1000 + static_cast<int32_t>(i));
      EXPECT_EQ(piece[static_cast<size_t>(q)][i],
                7 * static_cast<int32_t>(static_cast<size_t>(q) * kLen + i));
    }
  // Ranks 0, 2 (even) and 1, 3 (odd); rank 4 left out. Higher ranks first.
  EXPECT_EQ(halfSize, (std::vector<int>{2, 2, 2, 2, 0}));
  EXPECT_EQ(halfRank, (std::vector<int>{1, 1, 0, 0, 0}));
  EXPECT_EQ(halfSum, (std::vector<int32_t>{2, 4, 2, 4, 0}));
  for (chorusComm_t c : comms) {
    int dev = 0;
    EXPECT_EQ(chorusCommCuDevice(c, &dev), chorusSuccess);
    EXPECT_EQ(dev, -1);
    EXPECT_EQ(chorusCommFinalize(c), chorusSuccess);
    chorusCommDestroy(c);
  }
}

TEST(CApi, InitRankDeviceWithoutAGpuIsRefused) {
  chorusUniqueId id;
  ASSERT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  chorusComm_t c = nullptr;
  chorusResult_t r = chorusCommInitRankDevice(&c, 1, id, 0, 0);
  if (r == chorusSuccess) {
    chorusCommDestroy(c);
    GTEST_SKIP() << "this machine has a GPU";
  }
  EXPECT_EQ(r, chorusInvalidUsage);
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(chorusCommSplit(nullptr, 0, 0, &c), chorusInvalidArgument);
  EXPECT_EQ(chorusCommSplit(nullptr, -2, 0, &c), chorusInvalidArgument);
}

// chorusCommShrink: ranks 1 and 3 of five are left out and never call; the
// survivors get ranks 0..2 in their old order. Then with abortFirst on a
// communicator whose rank 1 waits in a call that cannot complete.
TEST(CApi, ShrinkLeavesOutRanksThatDoNotCall) {
  auto comms = initAll(5);
  const int out[2] = {1, 3};
  std::vector<int> size(5, -1), rank(5, -1);
  std::vector<int32_t> sum(5, -1);
  std::vector<std::thread> ts;
  for (int r : {0, 2, 4}) {
    ts.emplace_back([&, r] {
      chorusComm_t s = nullptr;
      ASSERT_EQ(chorusCommShrink(comms[static_cast<size_t>(r)], out, 2, 0, &s), chorusSuccess)
          << chorusGetLastError(nullptr);
      chorusCommCount(s, &size[static_cast<size_t>(r)]);
      chorusCommUserRank(s, &rank[static_cast<size_t>(r)]);
      int32_t v = r;
      EXPECT_EQ(
          chorusAllReduce(&v, &sum[static_cast<size_t>(r)], 1, chorusInt32, chorusSum, s, nullptr),
          chorusSuccess);
      chorusCommDestroy(s);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(size, (std::vector<int>{3, -1, 3, -1, 3}));
  EXPECT_EQ(rank, (std::vector<int>{0, -1, 1, -1, 2}));
  EXPECT_EQ(sum, (std::vector<int32_t>{6, -1, 6, -1, 6}));
  chorusComm_t s = nullptr;
  const int self[1] = {0};
  const int far[1] = {9};
  EXPECT_EQ(chorusCommShrink(comms[0], self, 1, 0, &s), chorusInvalidArgument);
  EXPECT_EQ(chorusCommShrink(comms[0], far, 1, 0, &s), chorusInvalidArgument);
  EXPECT_EQ(chorusCommShrink(comms[0], nullptr, 1, 0, &s), chorusInvalidArgument);
  destroyAll(comms);

  // Rank 1 of three waits in an allreduce rank 2 never joins; ranks 0 and 1
  // shrink rank 2 away with abortFirst, which ends rank 1's call.
  comms = initAll(3);
  chorusResult_t waited = chorusSuccess;
  std::thread stuck([&] {
    float x = 1;
    waited = chorusAllReduce(&x, &x, 1, chorusFloat, chorusSum, comms[1], nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int two[1] = {2};
  std::vector<chorusComm_t> pair(2, nullptr);
  std::thread other(
      [&] { EXPECT_EQ(chorusCommShrink(comms[1], two, 1, 1, &pair[1]), chorusSuccess); });
  EXPECT_EQ(chorusCommShrink(comms[0], two, 1, 1, &pair[0]), chorusSuccess)
      << chorusGetLastError(nullptr);
  other.join();
  stuck.join();
  EXPECT_NE(waited, chorusSuccess);
  int n = 0;
  ASSERT_NE(pair[0], nullptr);
  EXPECT_EQ(chorusCommCount(pair[0], &n), chorusSuccess);
  EXPECT_EQ(n, 2);
  for (chorusComm_t c : pair) chorusCommDestroy(c);
  for (chorusComm_t c : comms) chorusCommDestroy(c);
}

// A call refused inside a group drops the whole group at chorusGroupEnd,
// with the refusal's code and reason; the group's other calls do not run
// (NCCL's rule: the other ranks would wait for the refused one).
TEST(CApi, ARefusedCallDropsItsGroup) {
  auto comms = initAll(1);
  float in[4] = {1, 2, 3, 4};
  float out[4] = {-1, -1, -1, -1};
  ASSERT_EQ(chorusGroupStart(), chorusSuccess);
  EXPECT_EQ(
      chorusAllReduce(in, out, 4, static_cast<chorusDataType_t>(99), chorusSum, comms[0], nullptr),
      chorusInvalidArgument);
  EXPECT_EQ(chorusAllReduce(in, out, 4, chorusFloat, chorusSum, comms[0], nullptr), chorusSuccess);
  EXPECT_EQ(chorusGroupEnd(), chorusInvalidArgument);
  std::string why = chorusGetLastError(nullptr);
  EXPECT_NE(why.find("chorusGroupEnd: a call of the group was refused"), std::string::npos) << why;
  EXPECT_NE(why.find("chorusAllReduce"), std::string::npos) << why;
  for (float v : out) EXPECT_EQ(v, -1.0f);
  // The next group starts clean and runs.
  ASSERT_EQ(chorusGroupStart(), chorusSuccess);
  EXPECT_EQ(chorusAllReduce(in, out, 4, chorusFloat, chorusSum, comms[0], nullptr), chorusSuccess);
  EXPECT_EQ(chorusGroupEnd(), chorusSuccess) << chorusGetLastError(nullptr);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], in[i]);
  destroyAll(comms);
}

// A split that timed out is withdrawn: a late rank does not complete it
// alone, and the timed-out rank's next split meets the others'.
TEST(CApi, ATimedOutSplitIsWithdrawn) {
  setenv("CHORUS_TIMEOUT_S", "1", 1);
  auto comms = initAll(2);
  unsetenv("CHORUS_TIMEOUT_S");
  chorusComm_t lone = nullptr;
  EXPECT_EQ(chorusCommSplit(comms[0], 0, 0, &lone), chorusTimeout);
  EXPECT_EQ(lone, nullptr);
  // Now both call: one split of two ranks, the same world for both.
  std::vector<chorusComm_t> halves(2, nullptr);
  auto res = runThreads(comms, [&](int r) {
    return chorusCommSplit(comms[static_cast<size_t>(r)], 0, r, &halves[static_cast<size_t>(r)]);
  });
  EXPECT_EQ(res, (std::vector<chorusResult_t>{chorusSuccess, chorusSuccess})) << messages[0];
  ASSERT_NE(halves[0], nullptr);
  ASSERT_NE(halves[1], nullptr);
  std::vector<int32_t> sum(2, -1);
  res = runThreads(halves, [&](int r) {
    int32_t v = 10 + r;
    return chorusAllReduce(&v, &sum[static_cast<size_t>(r)], 1, chorusInt32, chorusSum,
                           halves[static_cast<size_t>(r)], nullptr);
  });
  EXPECT_EQ(res, (std::vector<chorusResult_t>{chorusSuccess, chorusSuccess})) << messages[0];
  EXPECT_EQ(sum, (std::vector<int32_t>{21, 21}));
  destroyAll(halves);
  destroyAll(comms);
}

}  // namespace
}  // namespace chorus::api
