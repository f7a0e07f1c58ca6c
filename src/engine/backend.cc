// The step engine behind the device seam (runtime/device_backend.h): each
// "device" is this host, each IR threadblock a block polled by host threads
// (runtime::PlanWorld), or by a team of them (threadsPerBlock > 1: the
// data divided among them as among a CUDA block's threads). Calls run when enqueued, on the calling
// thread and its helpers; streams must be null. Registered by registerEngineBackend()
// (src/engine/CMakeLists.txt: chorus_device_backend).
#include <algorithm>
#include <chrono>
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

// One algorithm's PlanWorld. A failed call is kept for wait() and the calls
// after it are skipped, as a device's stream skips work after a fault.
class Executor final : public runtime::DeviceExecutor {
 public:
  explicit Executor(std::unique_ptr<runtime::PlanWorld> w) : w_(std::move(w)) {}
  Status enqueue(const std::vector<CallArgs>& calls, const std::vector<void*>& streams) override {
    if (std::any_of(streams.begin(), streams.end(), [](void* s) { return s != nullptr; }))
      return Status(StatusCode::kInvalidArgument,
                    "the step engine runs calls when they are enqueued: pass no streams");
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return Status(StatusCode::kAborted, "the step engine's executor was aborted");
    if (!failure_.isOk()) return Status::ok();
    failure_ = w_->run(calls);
    return Status::ok();
  }
  Status asyncError() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }
  Status waitLaunches() const override { return Status::ok(); }
  Status wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(failure_, Status::ok());
  }
  // A running call is not interrupted (a stalled one fails on its own,
  // kDeadlock); later ones are refused.
  void abort() override {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
  }

 private:
  std::unique_ptr<runtime::PlanWorld> w_;
  mutable std::mutex mu_;
  Status failure_;
  bool aborted_ = false;
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
    auto w = runtime::PlanWorld::make(va, o);
    if (!w.isOk()) return w.status();
    return std::unique_ptr<runtime::DeviceExecutor>(
        std::make_unique<Executor>(std::move(w).value()));
  }
  Result<std::unique_ptr<runtime::StagedQueue>> makeStagedQueue(int, int) const override {
    return Status(StatusCode::kUnsupported,
                  "the step engine runs every rank in this process; it has no staged ranks");
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
