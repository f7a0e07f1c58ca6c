// The device seam (runtime/device_backend.h) seen from the C API, with a
// backend of the test's own registered before any other: what a GPU
// communicator hands its backend (devices, CHORUS_TIMEOUT_S, slots, the
// ranks' calls and streams), and that aborting reaches its executors. A
// separate executable, so that this backend is the first registered. And
// the step engine behind the same seam.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "algorithms/classic.h"
#include "api/backends.h"
#include "chorus/chorus.h"
#include "ir/ir.h"
#include "runtime/device_backend.h"

namespace chorus {
namespace {

// What the fake backend saw. Its "device memory" is the addresses in `device`.
struct Seen {
  std::mutex mu;
  std::set<const void*> device;
  std::vector<runtime::DeviceOptions> options;
  std::vector<std::vector<runtime::CallArgs>> calls;
  std::vector<std::vector<void*>> streams;
  std::atomic<int> aborts{0};
  bool refuseNewLL = false;  // LL executors made from now on refuse their first call
};
Seen& seen() {
  static auto* s = new Seen();
  return *s;
}

class FakeExecutor final : public runtime::DeviceExecutor {
 public:
  explicit FakeExecutor(bool refuseFirst) : refuse_(refuseFirst) {}
  Status enqueue(const std::vector<runtime::CallArgs>& calls,
                 const std::vector<void*>& streams) override {
    // As a CUDA world's first call inside a stream capture: no connections yet.
    if (std::exchange(refuse_, false))
      return Status(StatusCode::kUnsupported, "connections cannot be made while capturing");
    std::lock_guard<std::mutex> lock(seen().mu);
    seen().calls.push_back(calls);
    seen().streams.push_back(streams);
    return Status::ok();
  }
  Status asyncError() const override { return Status::ok(); }
  Status waitLaunches() const override { return Status::ok(); }
  Status wait() override { return Status::ok(); }
  void abort() override { ++seen().aborts; }

 private:
  bool refuse_;
};

class FakeBackend final : public runtime::DeviceBackend {
 public:
  std::string_view name() const override { return "fake"; }
  Result<int> deviceCount() const override { return 2; }
  bool isDeviceMemory(const void* p) const override {
    std::lock_guard<std::mutex> lock(seen().mu);
    return seen().device.count(p) != 0;
  }
  Result<std::unique_ptr<runtime::DeviceExecutor>> makeExecutor(
      const runtime::VerifiedAlgorithm&, const runtime::DeviceOptions& o) const override {
    std::lock_guard<std::mutex> lock(seen().mu);
    seen().options.push_back(o);
    bool refuse = seen().refuseNewLL && o.protocol == static_cast<int>(ir::Protocol::kLL);
    return std::unique_ptr<runtime::DeviceExecutor>(std::make_unique<FakeExecutor>(refuse));
  }
  Result<std::unique_ptr<runtime::StagedQueue>> makeStagedQueue(int, int) const override {
    return Status(StatusCode::kUnsupported, "the fake backend stages nothing");
  }
  Status copyBetweenStreams(void*, int, void*, const void*, int, void*, size_t) const override {
    return Status::ok();
  }
};

TEST(DeviceSeam, GpuWorldsHandTheirBackendItsDevicesTimeoutAndCalls) {
  ASSERT_TRUE(runtime::registerDeviceBackend(std::make_unique<FakeBackend>()).isOk());
  ASSERT_NE(api::deviceBackend(), nullptr);
  EXPECT_EQ(api::deviceBackend()->name(), "fake");
  EXPECT_EQ(runtime::registerDeviceBackend(std::make_unique<FakeBackend>()).code(),
            StatusCode::kInvalidArgument);

  setenv("CHORUS_TIMEOUT_S", "7", 1);
  // LL for small built-in calls (off by default since the H200's numbers,
  // docs/cuda.md "Small calls"): the LL executor beside the Simple one.
  setenv("CHORUS_GPU_LL_BYTES", "65536", 1);
  std::vector<chorusComm_t> comms(2);
  const int devlist[2] = {1, 0};
  ASSERT_EQ(chorusCommInitAll(comms.data(), 2, devlist), chorusSuccess)
      << chorusGetLastError(nullptr);
  unsetenv("CHORUS_TIMEOUT_S");
  unsetenv("CHORUS_GPU_LL_BYTES");
  const int beyond[1] = {2};  // the fake has devices 0 and 1
  chorusComm_t refused = nullptr;
  EXPECT_EQ(chorusCommInitAll(&refused, 1, beyond), chorusInvalidArgument);

  std::vector<float> buf(8 * 4, 0.0f);  // "device" buffers, never touched by the fake
  {
    std::lock_guard<std::mutex> lock(seen().mu);
    for (int r = 0; r < 2; ++r) seen().device.insert(&buf[static_cast<size_t>(r) * 16]);
    for (int r = 0; r < 2; ++r) seen().device.insert(&buf[static_cast<size_t>(r) * 16 + 8]);
  }
  int s0 = 0, s1 = 0;  // stand-ins for the ranks' streams
  std::vector<chorusResult_t> res(2, chorusInternalError);
  std::vector<std::thread> ts;
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      float* mine = &buf[static_cast<size_t>(r) * 16];
      res[static_cast<size_t>(r)] =
          chorusAllReduce(mine, mine + 8, 8, chorusFloat, chorusSum, comms[static_cast<size_t>(r)],
                          r == 0 ? static_cast<void*>(&s0) : static_cast<void*>(&s1));
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(res, (std::vector<chorusResult_t>{chorusSuccess, chorusSuccess}))
      << chorusGetLastError(nullptr);
  {
    std::lock_guard<std::mutex> lock(seen().mu);
    ASSERT_EQ(seen().options.size(), 1u);
    const runtime::DeviceOptions& o = seen().options[0];
    EXPECT_EQ(o.rankDevices, (std::vector<int>{1, 0}));
    EXPECT_EQ(o.timeoutMs, 7000);  // B3: the world's CHORUS_TIMEOUT_S
    EXPECT_EQ(o.slots, 8);
    ASSERT_EQ(seen().calls.size(), 1u);
    ASSERT_EQ(seen().calls[0].size(), 2u);
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(seen().calls[0][r].sendbuff, &buf[r * 16]);
      EXPECT_EQ(seen().calls[0][r].recvbuff, &buf[r * 16 + 8]);
      EXPECT_EQ(seen().calls[0][r].count, 8u);
    }
    EXPECT_EQ(seen().streams[0], (std::vector<void*>{&s0, &s1}));
    // A small call of a built-in runs on LL's slots.
    EXPECT_EQ(o.protocol, static_cast<int>(ir::Protocol::kLL));
  }
  // A large one on the built-in's own protocol: another executor, the small
  // calls' one kept for them.
  const size_t big = 20000;  // 80 KB of floats: above the 64 KiB of LL set above
  std::vector<float> large(4 * big, 0.0f);
  {
    std::lock_guard<std::mutex> lock(seen().mu);
    for (size_t k = 0; k < 4; ++k) seen().device.insert(&large[k * big]);
  }
  // Both ranks allreduce `count` elements of their halves of `large`.
  auto allReduceLarge = [&](size_t count) {
    std::vector<chorusResult_t> got(2, chorusInternalError);
    std::vector<std::thread> both;
    for (int r = 0; r < 2; ++r)
      both.emplace_back([&, r] {
        float* mine = &large[static_cast<size_t>(r) * 2 * big];
        got[static_cast<size_t>(r)] =
            chorusAllReduce(mine, mine + big, count, chorusFloat, chorusSum,
                            comms[static_cast<size_t>(r)], nullptr);
      });
    for (auto& t : both) t.join();
    return got;
  };
  EXPECT_EQ(allReduceLarge(big), (std::vector<chorusResult_t>{chorusSuccess, chorusSuccess}))
      << chorusGetLastError(nullptr);
  {
    std::lock_guard<std::mutex> lock(seen().mu);
    ASSERT_EQ(seen().options.size(), 2u);
    EXPECT_EQ(seen().options[1].protocol, -1);
    seen().refuseNewLL = true;
  }
  // A 32 KiB call: the ring (above recursive doubling's 16 KiB) on LL slots,
  // a new executor whose first call is refused (as inside a CUDA graph
  // capture, where it cannot make connections): it runs on the ring's own
  // executor instead, which has them.
  const size_t mid = 8192;
  size_t callsBefore = 0;
  {
    std::lock_guard<std::mutex> lock(seen().mu);
    callsBefore = seen().calls.size();
  }
  EXPECT_EQ(allReduceLarge(mid), (std::vector<chorusResult_t>{chorusSuccess, chorusSuccess}))
      << chorusGetLastError(nullptr);
  {
    std::lock_guard<std::mutex> lock(seen().mu);
    ASSERT_EQ(seen().options.size(), 3u);
    EXPECT_EQ(seen().options[2].protocol, static_cast<int>(ir::Protocol::kLL));
    ASSERT_EQ(seen().calls.size(), callsBefore + 1);  // once, on the ring's own executor
    EXPECT_EQ(seen().calls.back()[0].count, mid);
  }
  // A host buffer on a GPU communicator is the backend's to refuse; a
  // device buffer on a host communicator is the API's.
  std::vector<chorusComm_t> host(1);
  ASSERT_EQ(chorusCommInitAll(host.data(), 1, nullptr), chorusSuccess);
  EXPECT_EQ(chorusAllReduce(&buf[0], &buf[8], 8, chorusFloat, chorusSum, host[0], nullptr),
            chorusInvalidArgument);
  EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("GPU device memory"), std::string::npos)
      << chorusGetLastError(nullptr);
  EXPECT_EQ(chorusCommDestroy(host[0]), chorusSuccess);

  // Abort reaches the executors.
  EXPECT_EQ(chorusCommAbort(comms[0]), chorusSuccess);
  EXPECT_EQ(seen().aborts.load(), 3);  // every executor
  EXPECT_EQ(chorusCommDestroy(comms[1]), chorusSuccess);
}

// The step engine as a backend (src/engine): reached by name only, never a
// communicator's device; its executor runs a verified ring on host threads
// with the calls' data exact, refuses streams, and stops after an abort.
TEST(DeviceSeam, TheEngineIsReachedByNameAndRunsOnHostThreads) {
  const runtime::DeviceBackend* engine = api::deviceBackend("engine");
  ASSERT_NE(engine, nullptr);
  EXPECT_TRUE(engine->emulated());
  EXPECT_NE(api::deviceBackend(), engine);  // the CUDA backend, or none
  EXPECT_EQ(api::deviceBackend("no-such-backend"), nullptr);
  EXPECT_FALSE(engine->isDeviceMemory(this));

  const int n = 4;
  const size_t count = 4 * 1000;  // a multiple of the ring's 4 chunks
  auto algo = algorithms::makeClassic("ring_allreduce", n, 0);
  ASSERT_TRUE(algo.isOk()) << algo.status().message();
  auto va = runtime::VerifiedAlgorithm::make(std::move(algo).value());
  ASSERT_TRUE(va.isOk()) << va.status().message();
  runtime::DeviceOptions o;
  o.rankDevices.assign(n, 0);
  o.hostThreads = 2;
  auto x = engine->makeExecutor(*va.value(), o);
  ASSERT_TRUE(x.isOk()) << x.status().message();

  std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count)), out = in;
  std::vector<runtime::CallArgs> calls(n);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i)
      in[static_cast<size_t>(r)][i] = r * 100000 + static_cast<int32_t>(i);
    runtime::CallArgs& c = calls[static_cast<size_t>(r)];
    c.sendbuff = in[static_cast<size_t>(r)].data();
    c.recvbuff = out[static_cast<size_t>(r)].data();
    c.count = count;
    c.type = DataType::kInt32;
    c.op = ReduceOp::kSum;
  }
  ASSERT_TRUE(x.value()->enqueue(calls, std::vector<void*>(n, nullptr)).isOk());
  ASSERT_TRUE(x.value()->wait().isOk());
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(out[static_cast<size_t>(r)][i], 600000 + 4 * static_cast<int32_t>(i))
          << "rank " << r << " element " << i;

  int stream = 0;
  EXPECT_EQ(x.value()->enqueue(calls, std::vector<void*>(n, &stream)).code(),
            StatusCode::kInvalidArgument);
  x.value()->abort();
  EXPECT_EQ(x.value()->enqueue(calls, std::vector<void*>(n, nullptr)).code(), StatusCode::kAborted);
}

}  // namespace
}  // namespace chorus
