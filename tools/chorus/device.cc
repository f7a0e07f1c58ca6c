#include "tools/chorus/device.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "api/backends.h"
#include "runtime/device_backend.h"
#include "runtime/exec/engine_host.h"

namespace chorus::cli {

namespace {

using runtime::CallArgs;
using runtime::VerifiedAlgorithm;

// The step engine on host threads: buffers stay where they are.
class EngineBackend final : public Backend {
 public:
  // A copy reads and writes each byte: twice memcpy's rate.
  explicit EngineBackend(const BackendOptions& o) : o_(o), copyBw_(2 * memcpyBandwidth()) {}
  std::string describe() const override {
    return "step engine (the CUDA executor's code) on " + std::to_string(o_.dev.hostThreads) +
           " host thread(s)";
  }
  double copyBandwidth() const override { return copyBw_; }
  std::string copyBandwidthHow() const override { return "memcpy of 64 MiB, best of 5"; }
  Status bind(const std::vector<CallArgs>& hostCalls, CollectiveKind, int) override {
    calls_ = hostCalls;
    return Status::ok();
  }
  const std::vector<CallArgs>& calls() const override { return calls_; }
  Status upload() override { return Status::ok(); }
  Status download() override { return Status::ok(); }
  Status enqueue(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls) override {
    if (!failure_.isOk()) return Status::ok();
    auto it = worlds_.find(&va);
    if (it == worlds_.end()) {
      runtime::PlanRunOptions o;
      o.threads = o_.dev.hostThreads;
      o.sliceBytes = o_.sliceBytes;
      o.slots = o_.slots;
      auto w = runtime::PlanWorld::make(va, o);
      if (!w.isOk()) return w.status();
      it = worlds_.emplace(&va, std::move(w).value()).first;
    }
    Status st = it->second->run(calls);
    if (!st.isOk()) failure_ = st;
    return Status::ok();
  }
  Status wait() override {
    Status st = failure_;
    failure_ = Status::ok();
    return st;
  }

 private:
  BackendOptions o_;
  double copyBw_ = 0;
  std::vector<CallArgs> calls_;
  std::map<const VerifiedAlgorithm*, std::unique_ptr<runtime::PlanWorld>> worlds_;
  Status failure_;
};

// A registered device backend (runtime/device_backend.h; CUDA's is
// "cuda"): every rank on one of its devices.
class DeviceSeamBackend final : public Backend {
 public:
  static Result<std::unique_ptr<Backend>> make(const BackendOptions& o,
                                               const runtime::DeviceBackend& backend) {
    int gpu = o.dev.gpu;
    Result<int> n = backend.deviceCount();
    if (!n.isOk()) return n.status();
    if (gpu < 0 || gpu >= n.value())
      return Status(StatusCode::kInvalidArgument, "no " + std::string(backend.name()) + " device " +
                                                      std::to_string(gpu) + " (" +
                                                      std::to_string(n.value()) + " found)");
    Result<std::string> name = backend.describeDevice(gpu);
    if (!name.isOk()) return name.status();
    std::string how;
    Result<double> bw = backend.copyBandwidth(gpu, &how);
    if (!bw.isOk()) return bw.status();
    std::unique_ptr<DeviceSeamBackend> b(new DeviceSeamBackend(backend));
    b->gpu_ = gpu;
    b->o_ = o;
    b->name_ = name.value();
    b->copyBw_ = bw.value();
    b->copyHow_ = how;
    return Result<std::unique_ptr<Backend>>(std::move(b));
  }
  std::string describe() const override {
    return "CUDA GPU " + std::to_string(gpu_) + ": " + name_ + ", every rank on it";
  }
  double copyBandwidth() const override { return copyBw_; }
  std::string copyBandwidthHow() const override { return copyHow_; }
  Status bind(const std::vector<CallArgs>& hostCalls, CollectiveKind coll, int nranks) override {
    mirror_.reset();
    auto m = backend_.mirror(hostCalls, coll, nranks, gpu_);
    if (!m.isOk()) return m.status();
    mirror_ = std::move(m).value();
    return Status::ok();
  }
  const std::vector<CallArgs>& calls() const override { return mirror_->calls(); }
  Status upload() override { return mirror_->upload(); }
  Status download() override { return mirror_->download(); }
  Status enqueue(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls) override {
    auto it = executors_.find(&va);
    if (it == executors_.end()) {
      runtime::DeviceOptions o;
      o.rankDevices.assign(static_cast<size_t>(va.algo().ngpus), gpu_);
      o.sliceBytes = o_.sliceBytes;
      o.slots = o_.slots;
      o.threadsPerBlock = o_.dev.threadsPerBlock;
      o.timeoutMs = 20000;  // a stalled measurement fails in 20 s, not a communicator's 300
      auto x = backend_.makeExecutor(va, o);
      if (!x.isOk()) return x.status();
      it = executors_.emplace(&va, std::move(x).value()).first;
    }
    // Every rank's call on the device's default stream.
    return it->second->enqueue(calls, std::vector<void*>(calls.size(), nullptr));
  }
  Status wait() override {
    Status first;
    for (auto& [va, x] : executors_) {
      Status st = x->wait();
      if (first.isOk() && !st.isOk()) first = st;
    }
    return first;
  }

 private:
  explicit DeviceSeamBackend(const runtime::DeviceBackend& backend) : backend_(backend) {}
  const runtime::DeviceBackend& backend_;
  int gpu_ = 0;
  BackendOptions o_;
  std::string name_, copyHow_;
  double copyBw_ = 0;
  std::unique_ptr<runtime::DeviceMirror> mirror_;
  std::map<const VerifiedAlgorithm*, std::unique_ptr<runtime::DeviceExecutor>> executors_;
};

}  // namespace

double memcpyBandwidth() {
  const size_t bytes = size_t{64} << 20;
  std::vector<unsigned char> a(bytes, 1), b(bytes, 2);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s);
    a[static_cast<size_t>(i)] = b[bytes - 1];  // keep the copies observable
  }
  return best;
}

Result<std::unique_ptr<Backend>> Backend::make(const BackendOptions& o) {
  if (o.slots < 1) return Status(StatusCode::kInvalidArgument, "--slots must be >= 1");
  if (o.dev.device == "engine") {
    if (o.dev.hostThreads < 1)
      return Status(StatusCode::kInvalidArgument, "--host-threads must be >= 1");
    return Result<std::unique_ptr<Backend>>(std::make_unique<EngineBackend>(o));
  }
  if (o.dev.device == "cuda") {
    const runtime::DeviceBackend* backend = api::deviceBackend();
    if (backend == nullptr || backend->name() != o.dev.device)
      return Status(StatusCode::kUnsupported,
                    "this chorus was built without CUDA (no nvcc at configure time, or "
                    "-DCHORUS_CUDA=OFF); --device engine runs the same executor code on host "
                    "threads");
    return DeviceSeamBackend::make(o, *backend);
  }
  return Status(StatusCode::kInvalidArgument,
                "unknown device '" + o.dev.device + "' (cpu, engine or cuda)");
}

}  // namespace chorus::cli
