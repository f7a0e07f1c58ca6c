// What the NCCL shim's translation units share (src/nccl): nccl.cc keeps
// the communicators and the last error; device_api.cc (NCCL's device API,
// whose header defines ncclWindow_vidmem its own way) asks through these.
#pragma once

#include <nccl.h>

#include <exception>
#include <new>
#include <string>

namespace chorus::nccl_shim {

// Records `why` as the last error (ncclGetLastError) and returns `code`.
ncclResult_t fail(ncclResult_t code, const std::string& why);
// `comm`'s rank and size; an error (recorded, naming `fn`) for a handle
// that is not a live communicator.
ncclResult_t rankAndSize(ncclComm_t comm, const char* fn, int* rank, int* size);

// Runs an API call's body, stopping every exception at the C boundary.
template <class F>
ncclResult_t guarded(const char* fn, F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(ncclSystemError, std::string(fn) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(ncclInternalError, std::string(fn) + ": internal error: " + e.what());
  } catch (...) {
    return fail(ncclInternalError, std::string(fn) + ": internal error");
  }
}

}  // namespace chorus::nccl_shim

// A NULL pointer argument, refused as NCCL refuses it.
#define NCCL_PTR_CHECK(ptr, fn, what)                 \
  if ((ptr) == nullptr)                               \
  return chorus::nccl_shim::fail(ncclInvalidArgument, \
                                 std::string(fn) + " : " what " argument is NULL")
