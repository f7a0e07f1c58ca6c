// Where `chorus run --device` and `chorus perf --device` run calls when not
// on CPU ranks: a device backend of this build, by name
// (runtime/device_backend.h): "engine" (the step engine, the CUDA
// executor's code, on host threads, runnable anywhere) or "cuda".
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/ir.h"
#include "runtime/exec/executor.h"
#include "tools/chorus/commands.h"

namespace chorus::cli {

struct BackendOptions {
  DeviceArgs dev;         // device "engine" or "cuda", and their settings
  size_t sliceBytes = 0;  // 0: the protocol's default
  int slots = 8;          // messages in flight per connection
};

class Backend {
 public:
  // kUnsupported for "cuda" in a build without CUDA or on a machine without
  // a GPU (the message says which); kInvalidArgument for bad options.
  static Result<std::unique_ptr<Backend>> make(const BackendOptions& options);
  virtual ~Backend() = default;
  // One line: what runs the calls.
  virtual std::string describe() const = 0;
  // Bytes read and written per second by a large copy on this device (the
  // limit a collective's memory traffic is rated against), and how it was
  // measured.
  virtual double copyBandwidth() const = 0;
  virtual std::string copyBandwidthHow() const = 0;
  // Mirrors one call's host buffers where the device reads them.
  virtual Status bind(const std::vector<runtime::CallArgs>& hostCalls, CollectiveKind coll,
                      int nranks) = 0;
  virtual const std::vector<runtime::CallArgs>& calls() const = 0;
  virtual Status upload() = 0;
  virtual Status download() = 0;
  // Runs (or enqueues) one call of `va` on every rank, on `protocol`'s
  // slots (an ir::Protocol; -1: the algorithm's; --protocol overrides
  // both); wait() returns once every call so far has finished, with the
  // first failure.
  virtual Status enqueue(const runtime::VerifiedAlgorithm& va,
                         const std::vector<runtime::CallArgs>& calls, int protocol = -1) = 0;
  // The protocol a call of `va` on `protocol`'s slots runs on, as enqueue()
  // decides.
  virtual ir::Protocol protocolFor(const runtime::VerifiedAlgorithm& va, int protocol) const = 0;
  virtual Status wait() = 0;
};

}  // namespace chorus::cli
