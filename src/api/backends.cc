#include "api/backends.h"

namespace chorus::backends {
void registerLinked();  // generated (cmake/DeviceBackends.cmake)
}

namespace chorus::api {

const runtime::DeviceBackend* deviceBackend() {
  static const bool registered = [] {
    backends::registerLinked();
    return true;
  }();
  (void)registered;
  return runtime::deviceBackend();
}

Status noDeviceBackend(const std::string& what) {
  return Status(StatusCode::kUnsupported,
                what + ", but this Chorus was built without CUDA (no device backend is linked)");
}

}  // namespace chorus::api
