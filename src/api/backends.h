// The device backend this build links for communicators
// (runtime/device_backend.h), with every linked backend registered on first
// use; nullptr when none is.
#pragma once

#include "runtime/device_backend.h"

namespace chorus::api {

const runtime::DeviceBackend* deviceBackend();
// The linked backend called `name` (emulated ones too); nullptr if none.
const runtime::DeviceBackend* deviceBackend(std::string_view name);

// The refusal for a device request where no backend is linked.
Status noDeviceBackend(const std::string& what);

}  // namespace chorus::api
