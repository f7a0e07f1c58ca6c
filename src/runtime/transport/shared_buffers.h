// Memory that ranks in other processes on this host can map
// (chorusMemAlloc): anonymous shared memory (a memfd) mapped here, which a
// peer maps once, read-only, through /proc/PID/fd/FD. A collective whose
// buffers live in it moves every message by reference with plain loads: the
// receiver reads (or reduces from) the sender's buffer where it lies, as
// ranks in one process do: one copy per byte moved, no system call per
// message, whatever the step does with it.
//
// Mapping a peer's memfd needs the same right as cross-memory attach
// (ptrace read access to the peer), so the transports offer it only where
// the ranks agreed on cross-memory attach, and fall back to it (one
// process_vm_readv) where a mapping fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace chorus::runtime {

// A region as the sender describes it in a message (plain data: it travels
// in shared ring memory).
struct SharedRegion {
  uint64_t base = 0;   // its address in the owner's process
  uint64_t bytes = 0;  // its length
  uint64_t id = 0;     // unique per allocation (never 0)
  int32_t fd = -1;     // the memfd in the owner's process
  int32_t pad = 0;
};

namespace shared_buffers {

// `bytes` (> 0) of zeroed memory peers can map, aligned to pages.
// kInvalidArgument for 0; kIoError if the kernel refuses.
Result<void*> allocate(size_t bytes);
// Frees what allocate() returned; kInvalidArgument for anything else.
// Peers that mapped it keep their mapping until they drop it.
Status release(void* p);
// The region that holds all of [p, p + bytes), if any.
std::optional<SharedRegion> find(const void* p, size_t bytes);
// Regions allocated and not yet released (tests).
size_t live();
// Changes whenever a region is allocated or released: what find() answered
// holds while this stays the same (one load, for callers on a hot path).
uint64_t generation();

// Bytes this process owns: from the heap, or from allocate() (mappable).
class Block {
 public:
  Block() = default;
  Block(Block&& o) noexcept { *this = std::move(o); }
  Block& operator=(Block&& o) noexcept;
  ~Block() { clear(); }
  // `n` zeroed bytes, replacing what it held (kIoError if mappable memory
  // cannot be had).
  Status assign(size_t n, bool mappable);
  unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  void clear();
  std::vector<unsigned char> heap_;
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
  bool mappable_ = false;
};

// A peer's region mapped read-only into this process.
class PeerMapping {
 public:
  ~PeerMapping();
  PeerMapping(const PeerMapping&) = delete;
  PeerMapping& operator=(const PeerMapping&) = delete;
  // `address` (in the owner's process) here.
  const unsigned char* at(uint64_t address) const { return data_ + (address - region_.base); }
  const SharedRegion& region() const { return region_; }
  // Maps region `r` of process `pid`, or reuses the mapping made earlier
  // (this process keeps the 64 most recently used). nullptr and `why` if
  // it cannot (the peer is gone, or it may not be opened).
  static std::shared_ptr<const PeerMapping> get(int pid, const SharedRegion& r, std::string* why);

 private:
  PeerMapping() = default;
  SharedRegion region_;
  const unsigned char* data_ = nullptr;
};

}  // namespace shared_buffers
}  // namespace chorus::runtime
