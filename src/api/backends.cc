#include "api/backends.h"

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
  return runtime::deviceBackend();
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
