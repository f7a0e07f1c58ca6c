#include "tools/chorus/device.h"

#include <map>
#include <string>

#include "api/backends.h"
#include "ir/ir.h"
#include "runtime/device_backend.h"

namespace chorus::cli {

namespace {

using runtime::CallArgs;
using runtime::VerifiedAlgorithm;

// A registered device backend (runtime/device_backend.h: "cuda", or
// "engine", the step engine on host threads): every rank on one of its
// devices.
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
    std::string inst =
        o_.dev.instances > 0 ? ", " + std::to_string(o_.dev.instances) + " instance(s)" : "";
    if (!o_.dev.protocol.empty()) inst += ", " + o_.dev.protocol + " slots";
    if (backend_.emulated())
      return name_ + ", " + std::to_string(o_.dev.hostThreads) + " thread(s)" + inst;
    return std::string(backend_.name()) + " device " + std::to_string(gpu_) + ": " + name_ +
           ", every rank on it" + inst;
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
  ir::Protocol protocolFor(const VerifiedAlgorithm& va, int protocol) const override {
    if (auto p = ir::parseProtocol(o_.dev.protocol)) return *p;
    return protocol >= 0 ? static_cast<ir::Protocol>(protocol) : va.algo().protocol;
  }
  Status enqueue(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls,
                 int protocol) override {
    const int p = static_cast<int>(protocolFor(va, protocol));
    auto it = executors_.find({&va, p});
    if (it == executors_.end()) {
      runtime::DeviceOptions o;
      o.rankDevices.assign(static_cast<size_t>(va.algo().ngpus), gpu_);
      o.sliceBytes = o_.sliceBytes;
      o.slots = o_.slots;
      o.threadsPerBlock = o_.dev.threadsPerBlock;
      o.hostThreads = o_.dev.hostThreads;
      o.instances = o_.dev.instances;
      o.protocol = p;
      o.timeoutMs = 20000;  // a stalled measurement fails in 20 s, not a communicator's 300
      auto x = backend_.makeExecutor(va, o);
      if (!x.isOk()) return x.status();
      it = executors_.emplace(std::make_pair(&va, p), std::move(x).value()).first;
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
  std::map<std::pair<const VerifiedAlgorithm*, int>, std::unique_ptr<runtime::DeviceExecutor>>
      executors_;
};

}  // namespace

Result<std::unique_ptr<Backend>> Backend::make(const BackendOptions& o) {
  if (o.slots < 1) return Status(StatusCode::kInvalidArgument, "--slots must be >= 1");
  if (o.dev.hostThreads < 1)
    return Status(StatusCode::kInvalidArgument, "--host-threads must be >= 1");
  const runtime::DeviceBackend* backend = api::deviceBackend(o.dev.device);
  if (backend != nullptr) return DeviceSeamBackend::make(o, *backend);
  if (o.dev.device == "cuda")
    return Status(StatusCode::kUnsupported,
                  "this chorus was built without CUDA (no nvcc at configure time, or "
                  "-DCHORUS_CUDA=OFF); --device engine runs the same executor code on host "
                  "threads");
  std::string names = "cpu";
  for (const std::string& n : runtime::deviceBackendNames()) names += ", " + n;
  return Status(StatusCode::kInvalidArgument,
                "unknown device '" + o.dev.device + "' (this build has: " + names + ")");
}

}  // namespace chorus::cli
