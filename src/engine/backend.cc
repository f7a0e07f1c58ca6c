// The step engine behind the device seam (runtime/device_backend.h): each
// "device" is this host, each IR threadblock a block polled by host threads
// (runtime::PlanWorld), or by a team of them (threadsPerBlock > 1: the
// data divided among them as among a CUDA block's threads). Calls run when
// enqueued, on the calling thread and its helpers; streams must be null.
// Communicators take it for their "devices" when CHORUS_DEVICE_BACKEND=engine
// (the device path of the API, on host memory, without a GPU): a process
// rank then runs its own blocks on connections in shared memory that its
// peers map, as a CUDA process rank does with IPC handles. Registered by
// registerEngineBackend() (src/engine/CMakeLists.txt: chorus_device_backend).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/device_backend.h"
#include "runtime/exec/engine_host.h"

namespace chorus::engine_backend {
namespace {

using runtime::CallArgs;

// One algorithm's PlanWorld (every rank's, or one focus rank's). A failed
// call of every rank is kept for wait() and the calls after it are skipped,
// as a device's stream skips work after a fault; a focus rank's failure is
// returned at once too (the call has run), so its communicator can end and
// tell its peers, who hold half a call.
class Executor final : public runtime::DeviceExecutor {
 public:
  explicit Executor(std::unique_ptr<runtime::PlanWorld> w, std::shared_ptr<std::atomic<bool>> abort)
      : w_(std::move(w)), aborted_(std::move(abort)) {}
  Status enqueue(const std::vector<CallArgs>& calls, const std::vector<void*>& streams) override {
    if (std::any_of(streams.begin(), streams.end(), [](void* s) { return s != nullptr; }))
      return noStreams();
    Status st = run([&] { return w_->run(calls); });
    return st.code() == StatusCode::kAborted ? st : Status::ok();
  }
  Status enqueueRank(const CallArgs& call, void* stream) override {
    if (stream != nullptr) return noStreams();
    return run([&] { return w_->runRank(call); });
  }
  Status asyncError() const override {
    std::lock_guard<std::mutex> lock(failMu_);
    return failure_;
  }
  Status waitLaunches() const override { return Status::ok(); }
  Status wait() override {
    std::lock_guard<std::mutex> lock(failMu_);
    return std::exchange(failure_, Status::ok());
  }
  // The running call's blocks give up at their next wait (kAborted); later
  // calls are refused.
  void abort() override { aborted_->store(true, std::memory_order_relaxed); }

 private:
  static Status noStreams() {
    return Status(StatusCode::kInvalidArgument,
                  "the step engine runs calls when they are enqueued: pass no streams");
  }
  // Runs `call` unless an earlier one failed; its failure is kept and returned.
  template <class F>
  Status run(F call) {
    std::lock_guard<std::mutex> running(runMu_);  // one call at a time
    if (aborted_->load(std::memory_order_relaxed))
      return Status(StatusCode::kAborted, "the step engine's executor was aborted");
    if (Status earlier = asyncError(); !earlier.isOk()) return earlier;
    Status st = call();
    std::lock_guard<std::mutex> lock(failMu_);
    if (failure_.isOk()) failure_ = st;
    return st;
  }

  std::unique_ptr<runtime::PlanWorld> w_;
  std::shared_ptr<std::atomic<bool>> aborted_;  // the world's PlanRunOptions::abort
  std::mutex runMu_;
  mutable std::mutex failMu_;  // failure_ (read while a call runs)
  Status failure_;
};

// A rank of a process on the "device" of the step engine: host memory, so
// nothing is staged; each call runs when it is enqueued.
class InPlaceQueue final : public runtime::StagedQueue {
 public:
  int device() const override { return 0; }
  Status enqueue(const std::vector<void*>& streams, std::vector<runtime::StagedRegion> regions,
                 std::function<Status(const std::vector<void*>&)> run) override {
    if (std::any_of(streams.begin(), streams.end(), [](void* s) { return s != nullptr; }))
      return Status(StatusCode::kInvalidArgument,
                    "the step engine runs calls when they are enqueued: pass no streams");
    std::vector<void*> at;
    for (const runtime::StagedRegion& r : regions) at.push_back(r.data);
    return keep(run(at));
  }
  Status runInOrder(std::function<Status()> work) override { return work(); }
  Status asyncError() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }
  Status synchronize() override { return asyncError(); }

 private:
  Status keep(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.isOk()) failure_ = st;
    return Status::ok();
  }
  mutable std::mutex mu_;
  Status failure_;
};

// Host buffers are the device's: nothing to copy.
class Mirror final : public runtime::DeviceMirror {
 public:
  explicit Mirror(std::vector<CallArgs> calls) : calls_(std::move(calls)) {}
  const std::vector<CallArgs>& calls() const override { return calls_; }
  Status upload() override { return Status::ok(); }
  Status download() override { return Status::ok(); }

 private:
  std::vector<CallArgs> calls_;
};

class Backend final : public runtime::DeviceBackend {
 public:
  std::string_view name() const override { return "engine"; }
  bool emulated() const override { return true; }
  Result<int> deviceCount() const override { return 1; }
  bool isDeviceMemory(const void*) const override { return false; }
  Result<std::unique_ptr<runtime::DeviceExecutor>> makeExecutor(
      const runtime::VerifiedAlgorithm& va, const runtime::DeviceOptions& options) const override {
    runtime::PlanRunOptions o;
    if (options.hostThreads > 0) o.threads = options.hostThreads;
    if (options.instances != 0) o.instances = options.instances;
    if (options.threadsPerBlock > 0) o.teamThreads = options.threadsPerBlock;
    o.sliceBytes = options.sliceBytes;
    o.slots = options.slots;
    o.protocol = options.protocol;
    o.focus = options.focus;
    o.exchange = options.exchange;
    // A rank alone waits for peers in other processes: a stall is a peer
    // that stopped, after the communicator's timeout.
    if (options.focus >= 0) o.stallMs = options.timeoutMs;
    auto abort = std::make_shared<std::atomic<bool>>(false);
    o.abort = abort.get();
    auto w = runtime::PlanWorld::make(va, o);
    if (!w.isOk()) return w.status();
    return std::unique_ptr<runtime::DeviceExecutor>(
        std::make_unique<Executor>(std::move(w).value(), std::move(abort)));
  }
  // Process ranks "on" the step engine (CHORUS_DEVICE_BACKEND=engine) use
  // host memory in place.
  Result<std::unique_ptr<runtime::StagedQueue>> makeStagedQueue(int, int) const override {
    return std::unique_ptr<runtime::StagedQueue>(std::make_unique<InPlaceQueue>());
  }
  Result<void*> allocate(int, size_t bytes) const override {
    void* p = std::calloc(std::max<size_t>(bytes, 1), 1);
    if (p == nullptr) return Status(StatusCode::kIoError, "out of memory");
    return p;
  }
  void release(int, void* p) const override { std::free(p); }
  Result<std::shared_ptr<runtime::ConnectionExchange>> processExchange(
      int, int, const std::string& label, runtime::BlobAllGather allGather) const override {
    return runtime::sharedMemoryExchange(label, std::move(allGather));
  }
  Status copyBetweenStreams(void* dst, int, void*, const void* src, int, void*,
                            size_t bytes) const override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Result<std::string> describeDevice(int) const override {
    return std::string("step engine (the CUDA executor's code) on the host");
  }
  // A copy reads and writes each byte: twice memcpy's rate.
  Result<double> copyBandwidth(int, std::string* how) const override {
    *how = "memcpy of 64 MiB, best of 5, bytes read + written";
    return 2 * runtime::memcpyBandwidth();
  }
  Result<std::unique_ptr<runtime::DeviceMirror>> mirror(const std::vector<CallArgs>& hostCalls,
                                                        CollectiveKind, int, int) const override {
    return std::unique_ptr<runtime::DeviceMirror>(std::make_unique<Mirror>(hostCalls));
  }
};

}  // namespace
}  // namespace chorus::engine_backend

namespace chorus::backends {

void registerEngineBackend() {
  (void)runtime::registerDeviceBackend(std::make_unique<engine_backend::Backend>());
}

}  // namespace chorus::backends
