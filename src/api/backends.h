// The device backend this build links (runtime/device_backend.h), with
// every linked backend registered on first use; nullptr when none is.
#pragma once

#include "runtime/device_backend.h"

namespace chorus::api {

const runtime::DeviceBackend* deviceBackend();

// The refusal for a device request where no backend is linked.
Status noDeviceBackend(const std::string& what);

}  // namespace chorus::api
