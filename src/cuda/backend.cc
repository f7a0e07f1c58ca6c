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
  Status asyncError() const override { return w_->asyncError(); }
  Status waitLaunches() const override { return w_->waitLaunches(); }
  Status wait() override { return w_->wait(); }
  void abort() override { w_->abort(); }

 private:
  std::unique_ptr<CudaWorld> w_;
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
    auto w = CudaWorld::make(va, o);
    if (!w.isOk()) return w.status();
    return std::unique_ptr<runtime::DeviceExecutor>(
        std::make_unique<Executor>(std::move(w).value()));
  }
  Result<std::unique_ptr<runtime::StagedQueue>> makeStagedQueue(int device,
                                                                int timeoutMs) const override {
    return std::unique_ptr<runtime::StagedQueue>(std::make_unique<StagedRank>(device, timeoutMs));
  }
  Status copyBetweenStreams(void* dst, int dstDevice, void* dstStream, const void* src,
                            int srcDevice, void* srcStream, size_t bytes) const override {
    return cuda::copyBetweenStreams(dst, dstDevice, dstStream, src, srcDevice, srcStream, bytes);
  }
};

}  // namespace
}  // namespace chorus::cuda

namespace chorus::backends {

void registerCudaBackend() {
  (void)runtime::registerDeviceBackend(std::make_unique<cuda::Backend>());
}

}  // namespace chorus::backends
