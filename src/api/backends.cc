#include "api/backends.h"

#include <cstdlib>

#include "core/log.h"

namespace chorus::backends {
void registerLinked();  // generated (cmake/DeviceBackends.cmake)
}

namespace chorus::api {

namespace {
void registerOnce() {
  static const bool registered = [] {
    backends::registerLinked();
    return true;
  }();
  (void)registered;
}
}  // namespace

const runtime::DeviceBackend* deviceBackend() {
  registerOnce();
  // CHORUS_DEVICE_BACKEND names the one to use, emulated ones too ("engine":
  // the device path on host memory, for machines without a GPU).
  static const runtime::DeviceBackend* named = [] {
    const char* name = std::getenv("CHORUS_DEVICE_BACKEND");
    if (name == nullptr || *name == '\0')
      return static_cast<const runtime::DeviceBackend*>(nullptr);
    const runtime::DeviceBackend* b = runtime::deviceBackend(name);
    if (b == nullptr)
      logLine(LogLevel::kWarn, std::string("CHORUS_DEVICE_BACKEND=") + name +
                                   " names no backend this build links; using the default");
    return b;
  }();
  return named != nullptr ? named : runtime::deviceBackend();
}

const runtime::DeviceBackend* deviceBackend(std::string_view name) {
  registerOnce();
  return runtime::deviceBackend(name);
}

Status noDeviceBackend(const std::string& what) {
  return Status(StatusCode::kUnsupported,
                what + ", but this Chorus was built without CUDA (no device backend is linked)");
}

}  // namespace chorus::api
