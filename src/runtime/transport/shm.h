// POSIX shared-memory segments for ranks in different processes on one host.
// The creator makes a segment (exclusively, mode 0600), touches every page,
// and the peers open and map it; once every side has mapped it, it is
// unlinked ("unlink early, keep the mapping"), so nothing is left behind
// in /dev/shm however the processes end. Each Segment unmaps on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace chorus::runtime {

class Segment {
 public:
  // kIoError naming the segment (e.g. it exists, or /dev/shm is full).
  static Result<std::unique_ptr<Segment>> create(const std::string& name, size_t bytes);
  // kIoError if it does not exist; kInvalidArgument if it is smaller than `bytes`.
  static Result<std::unique_ptr<Segment>> open(const std::string& name, size_t bytes);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name (the mapping stays). Idempotent.
  void unlink();

 private:
  Segment() = default;
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;
};

// Cross-memory attach (process_vm_readv): copies `bytes` at `address` in
// process `pid` to `dst`, the one copy that replaces the two of a ring
// (sender into the slot, receiver out of it). Needs the right to ptrace
// `pid` (same user; Yama's ptrace_scope 0, or the peer's consent). kAborted
// naming `what` if the memory cannot be read.
Status readPeerMemory(int pid, uint64_t address, void* dst, size_t bytes, const std::string& what);

}  // namespace chorus::runtime
