// The CUDA backend behind the device seam (runtime/device_backend.h): the
// CUDA executor for worlds of one process, staged ranks for peers in other
// processes. Registered by registerCudaBackend(), which the generated list
// of src/api calls (src/cuda/CMakeLists.txt: chorus_device_backend).
#include <memory>

#include "cuda/staged.h"
#include "cuda/world.h"
#include "runtime/device_backend.h"

namespace chorus::cuda {
namespace {

class Executor final : public runtime::DeviceExecutor {
 public:
  explicit Executor(std::unique_ptr<CudaWorld> w) : w_(std::move(w)) {}
  Status enqueue(const std::vector<runtime::CallArgs>& calls,
                 const std::vector<void*>& streams) override {
    return w_->enqueue(calls, streams);
  }
  Status enqueueRank(const runtime::CallArgs& call, void* stream) override {
    return w_->enqueueRank(call, stream);
  }
  Status asyncError() const override { return w_->asyncError(); }
  Status waitLaunches() const override { return w_->waitLaunches(); }
  Status wait() override { return w_->wait(); }
  void abort() override { w_->abort(); }

 private:
  std::unique_ptr<CudaWorld> w_;
};

class Mirror final : public runtime::DeviceMirror {
 public:
  explicit Mirror(std::unique_ptr<DeviceBuffers> b) : b_(std::move(b)) {}
  const std::vector<runtime::CallArgs>& calls() const override { return b_->calls(); }
  Status upload() override { return b_->upload(); }
  Status download() override { return b_->download(); }

 private:
  std::unique_ptr<DeviceBuffers> b_;
};

class Backend final : public runtime::DeviceBackend {
 public:
  std::string_view name() const override { return "cuda"; }
  Result<int> deviceCount() const override { return cuda::deviceCount(); }
  bool isDeviceMemory(const void* p) const override { return cuda::isDeviceMemory(p); }
  Result<std::unique_ptr<runtime::DeviceExecutor>> makeExecutor(
      const runtime::VerifiedAlgorithm& va, const runtime::DeviceOptions& options) const override {
    CudaOptions o;
    o.rankDevices = options.rankDevices;
    o.sliceBytes = options.sliceBytes;
    o.slots = options.slots;
    o.timeoutMs = options.timeoutMs;
    if (options.threadsPerBlock > 0) o.threadsPerBlock = options.threadsPerBlock;
    o.instances = options.instances;
    o.protocol = options.protocol;
    if (options.focus >= 0) {  // one rank, on its device
      if (static_cast<size_t>(options.focus) >= options.rankDevices.size())
        return Status(StatusCode::kInvalidArgument,
                      "focus rank " + std::to_string(options.focus) + " has no device");
      o.focus = options.focus;
      o.exchange = options.exchange;
      o.gpuSharers = options.gpuSharers;
      o.device = options.rankDevices[static_cast<size_t>(options.focus)];
      o.rankDevices.clear();
    }
    auto w = CudaWorld::make(va, o);
    if (!w.isOk()) return w.status();
    return std::unique_ptr<runtime::DeviceExecutor>(
        std::make_unique<Executor>(std::move(w).value()));
  }
  Result<std::unique_ptr<runtime::StagedQueue>> makeStagedQueue(int device,
                                                                int timeoutMs) const override {
    return std::unique_ptr<runtime::StagedQueue>(std::make_unique<StagedRank>(device, timeoutMs));
  }
  // CUDA IPC handles (cudaIpcGetMemHandle), for processes of one node.
  Result<std::shared_ptr<runtime::ConnectionExchange>> processExchange(
      int device, int, const std::string&, runtime::BlobAllGather allGather) const override {
    return deviceExchange(device, std::move(allGather), /*ipc=*/true);
  }
  Result<void*> allocate(int device, size_t bytes) const override {
    return deviceZeroed(bytes, device);
  }
  void release(int, void* p) const override { deviceFree(p); }
  Status copyBetweenStreams(void* dst, int dstDevice, void* dstStream, const void* src,
                            int srcDevice, void* srcStream, size_t bytes) const override {
    return cuda::copyBetweenStreams(dst, dstDevice, dstStream, src, srcDevice, srcStream, bytes);
  }
  Result<std::string> describeDevice(int device) const override {
    return cuda::describeDevice(device);
  }
  Result<std::string> deviceIdentity(int device) const override { return deviceUuid(device); }
  Result<double> copyBandwidth(int device, std::string* how) const override {
    *how = "cudaMemcpy device to device of 256 MiB, best of 5, bytes read + written";
    return cuda::copyBandwidth(device, size_t{256} << 20);
  }
  Result<std::unique_ptr<runtime::DeviceMirror>> mirror(
      const std::vector<runtime::CallArgs>& hostCalls, CollectiveKind coll, int nranks,
      int device) const override {
    auto b = DeviceBuffers::make(hostCalls, coll, nranks, device);
    if (!b.isOk()) return b.status();
    return std::unique_ptr<runtime::DeviceMirror>(std::make_unique<Mirror>(std::move(b).value()));
  }
};

}  // namespace
}  // namespace chorus::cuda

namespace chorus::backends {

void registerCudaBackend() {
  (void)runtime::registerDeviceBackend(std::make_unique<cuda::Backend>());
}

}  // namespace chorus::backends
