#include "runtime/device_backend.h"

#include <mutex>

namespace chorus::runtime {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<DeviceBackend>> backends;  // only ever added to
};
Registry& registry() {
  static auto* r = new Registry();  // lives for the process: threads may outlive statics
  return *r;
}

}  // namespace

Status registerDeviceBackend(std::unique_ptr<DeviceBackend> backend) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& b : r.backends)
    if (b->name() == backend->name())
      return Status(StatusCode::kInvalidArgument,
                    "device backend '" + std::string(backend->name()) + "' is registered twice");
  r.backends.push_back(std::move(backend));
  return Status::ok();
}

const DeviceBackend* deviceBackend() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.backends.empty() ? nullptr : r.backends.front().get();
}

}  // namespace chorus::runtime
