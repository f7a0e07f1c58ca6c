#include "runtime/device_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
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
  for (const auto& b : r.backends)
    if (!b->emulated()) return b.get();
  return nullptr;
}

const DeviceBackend* deviceBackend(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& b : r.backends)
    if (b->name() == name) return b.get();
  return nullptr;
}

std::vector<std::string> deviceBackendNames() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& b : r.backends) names.emplace_back(b->name());
  return names;
}

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

}  // namespace chorus::runtime
