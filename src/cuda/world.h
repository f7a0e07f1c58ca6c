// The CUDA executor: a verified algorithm's FlatPlan run by the step engine
// (runtime/exec/engine.h) in CUDA blocks, one block per IR threadblock, every
// rank's blocks of one GPU in one cooperative launch per call.
//
// A CudaWorld holds one algorithm's state on its GPUs, allocated once and
// reused by every call: the plan's arrays, the connections (slots in the
// receiving rank's device memory, counters), per-rank scratch (grown when a call needs more). Ranks
// map to devices through CudaOptions::rankDevices: all on one GPU (a world on one GPU: the shape
// every test here uses) or one GPU per rank (peer access between them).
//
// This header needs no CUDA headers: streams are passed as void*
// (cudaStream_t). Everything returns a Status; nothing throws.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/exec/conn_exchange.h"
#include "runtime/exec/executor.h"

namespace chorus::cuda {

// GPUs this process can use; kUnsupported naming why when none (no driver,
// no device, a CUDA error).
Result<int> deviceCount();
// One line about device `d`: name, SMs, memory, compute capability.
Result<std::string> describeDevice(int d);
// Device `d`'s UUID in hexadecimal: the same GPU in every process.
Result<std::string> deviceUuid(int d);

struct CudaOptions {
  int device = 0;                // every rank's GPU unless rankDevices says otherwise
  std::vector<int> rankDevices;  // per rank (empty: all on `device`)
  size_t sliceBytes = 0;         // 0: the algorithm's (ir::sliceBytesOf)
  int slots = 8;                 // messages in flight per connection (as the CPU runtime)
  // CUDA threads per block; 0: kDefaultThreads, or fewer (down to
  // kFewestThreads) where the algorithm's blocks only fit at smaller ones,
  // and one warp for calls of small messages (kWarpMessageBytes,
  // kWarpPacketMessageBytes).
  int threadsPerBlock = 0;
  int timeoutMs = 20000;  // a call that makes no progress this long fails (kTimeout)
  // CUDA blocks per IR threadblock, each with its share of every slice
  // (runtime::FlatPlan::lower); 0: as many as put one block on every SM of
  // the busiest GPU, at most kAutoInstances.
  int instances = 0;
  // The slots' layout (an ir::Protocol) whatever the algorithm's; -1: the
  // algorithm's. Any algorithm runs on any of the three (the C API runs its
  // built-ins on LL for small calls).
  int protocol = -1;
  // One rank of a world whose other ranks are other processes (issue 41):
  // >= 0 launches only rank `focus`'s blocks, on `device`, calls come one
  // rank at a time (enqueueRank), and the connections to and from the rank
  // live in device memory shared through `exchange` (ipcExchange: CUDA IPC
  // between processes). Ordering is then system-scoped. After a failed call
  // the world refuses further calls (its peers hold half a call).
  int focus = -1;
  std::shared_ptr<runtime::ConnectionExchange> exchange;
  // A focus world: how many ranks' worlds run on this GPU at once (its own
  // included). All their blocks must be resident together (a block waiting
  // for a peer's that cannot start waits for ever), so the automatic
  // instances and block size take 1/gpuSharers of the GPU, and a world whose
  // blocks times gpuSharers exceed what the GPU holds is refused.
  int gpuSharers = 1;
};

inline constexpr int kAutoInstances = 16;
// Calls whose largest message is at most this many bytes (in whole chunks,
// before slices are cut for instances) launch one warp per block when the
// block size is the world's choice: 32 threads x 16 bytes x
// rc::kCopyUnroll 8, one round of the data loop. On Simple's slots; on LL
// and LL128, whose packets a warp moves a few at a time, up to
// kWarpPacketMessageBytes: on an H200 (8 ranks) a warp per block beat 256
// threads by 1.5 us up to 128 B and lost above (37 vs 31 us at 512 B, 79
// vs 32 at 2 KiB; docs/cuda.md, "Small calls").
inline constexpr size_t kWarpMessageBytes = 4096;
inline constexpr size_t kWarpPacketMessageBytes = 128;
inline constexpr int kDefaultThreads = 256;
inline constexpr int kFewestThreads = 64;

// A GPU of `sms` SMs holding `perSm` blocks of the kernel each, shared by
// `sharers` worlds of `blocks` blocks (one instance) each:
// whether they are all resident at once, and the automatic instance count,
// as many as put a block on every SM of a world's share, at most
// kAutoInstances, at least 1.
inline bool residentTogether(long blocks, int sharers, int sms, int perSm) {
  return blocks * sharers <= static_cast<long>(sms) * perSm;
}
inline int autoInstances(int blocks, int sharers, int sms, int perSm) {
  const int fit = std::min(sms, perSm * sms) / std::max(blocks * sharers, 1);
  return std::clamp(fit, 1, kAutoInstances);
}

class CudaWorld {
 public:
  // Errors: kUnsupported (no such device, a CUDA error), kInvalidArgument
  // (bad options; more blocks than one GPU can hold at once, naming both
  // numbers: the kernel's blocks must all be resident or it could
  // deadlock, so it is refused instead).
  static Result<std::unique_ptr<CudaWorld>> make(const runtime::VerifiedAlgorithm& va,
                                                 const CudaOptions& options = {});
  ~CudaWorld();
  CudaWorld(const CudaWorld&) = delete;
  CudaWorld& operator=(const CudaWorld&) = delete;

  // Enqueues one call of every rank (device buffers, as NCCL takes them)
  // on `stream` (a cudaStream_t of the first rank's device; nullptr: the
  // legacy default stream) and returns. Errors (nothing enqueued):
  // kInvalidArgument as runtime::planCall, a host pointer where device
  // memory is needed (naming the rank and buffer), avg on a collective that
  // does not reduce.
  Status enqueue(const std::vector<runtime::CallArgs>& calls, void* stream = nullptr);
  // The same with each rank's work on its own stream (streams[r]: a
  // cudaStream_t of rank r's device; nullptr: the legacy default stream),
  // as when every rank of an NCCL communicator calls with its own stream:
  // the launch waits for what every stream held before the call, and each
  // stream's later work waits for the launch.
  Status enqueue(const std::vector<runtime::CallArgs>& calls, const std::vector<void*>& streams);
  // A world with a focus rank: that rank's call on `stream`. Its peers'
  // worlds enqueue theirs; the kernels meet through the shared connections.
  Status enqueueRank(const runtime::CallArgs& call, void* stream = nullptr);
  // A call's failure (stalled past the timeout, aborted) without waiting;
  // ok while none is known. wait() reports it in full and resets.
  Status asyncError() const;
  // Waits for the calls enqueued so far; kTimeout or kAborted naming every
  // unfinished block's rank, threadblock, step and iteration when a call
  // stalled or was aborted (the connections are then reset).
  Status wait();
  // Ends the running call (its blocks give up at their next wait): what
  // chorusCommAbort does to a hung collective. Safe from any thread.
  void abort();
  // Waits for the calls enqueued so far without looking at their outcome
  // (safe beside enqueue() on another thread; wait() is not).
  Status waitLaunches() const;

  int maxResident() const;      // blocks the first device can hold at once for this kernel
  int threadsPerBlock() const;  // the block size the world launches

 private:
  CudaWorld();
  Status enqueueOn(const std::vector<runtime::CallArgs>& calls, void* stream);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Device copies of one call's host buffers (a runtime::CollectiveData's, say):
// each rank's send and receive buffers in one device allocation when they
// overlap (in-place calls), so the device call keeps the host call's
// in-place or out-of-place form exactly.
class DeviceBuffers {
 public:
  // `hostCalls` as a collective `coll` of `nranks` ranks lays them out;
  // rank r's buffers on rankDevices[r] (empty: all on `device`).
  static Result<std::unique_ptr<DeviceBuffers>> make(
      const std::vector<runtime::CallArgs>& hostCalls, CollectiveKind coll, int nranks,
      int device = 0, const std::vector<int>& rankDevices = {});
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  // The same calls on the device copies.
  const std::vector<runtime::CallArgs>& calls() const { return device_; }
  Status upload();    // host -> device, every buffer
  Status download();  // device -> host, every buffer

 private:
  DeviceBuffers() = default;
  struct Region {
    unsigned char* host = nullptr;
    unsigned char* dev = nullptr;
    size_t bytes = 0;
  };
  std::vector<Region> regions_;
  std::vector<runtime::CallArgs> device_;
};

// Connection memory on `device` for worlds with a focus rank, exchanged by
// `allGather` (every rank's blob by rank; the processes' bootstrap). With
// `ipc`, regions are shared between processes by cudaIpcGetMemHandle /
// cudaIpcOpenMemHandle (a peer in this same process, which CUDA does not let
// open its own handles, takes the address); without, handles are device
// addresses (ranks on threads of one process, as the GPU tests run them).
std::shared_ptr<runtime::ConnectionExchange> deviceExchange(
    int device, std::function<Result<std::vector<std::string>>(const std::string&)> allGather,
    bool ipc);

// Whether `p` is device memory (not managed or host memory) of some GPU;
// false when there is no GPU. What a host communicator refuses.
bool isDeviceMemory(const void* p);

// A send matched with its receive, on GPUs of one process: copies `bytes`
// from `src` (GPU srcDevice) to `dst` (GPU dstDevice) on dstStream once
// srcStream's earlier work is done, and makes srcStream's later work wait
// for the copy too (the sender may then reuse its buffer). Enqueued, not
// waited for; streams are cudaStream_t (nullptr: the legacy default one).
Status copyBetweenStreams(void* dst, int dstDevice, void* dstStream, const void* src, int srcDevice,
                          void* srcStream, size_t bytes);

// Device memory helpers for tools and tests (kUnsupported on CUDA errors).
Result<void*> deviceAlloc(size_t bytes, int device = 0);
void deviceFree(void* p);
// `bytes` of zeroed memory on `device`, the calling thread's device kept.
Result<void*> deviceZeroed(size_t bytes, int device);
Status copyToDevice(void* dst, const void* src, size_t bytes);
Status copyToHost(void* dst, const void* src, size_t bytes);

// Device-to-device copy bandwidth of `device` with cudaMemcpyAsync over
// `bytes` (best of `reps`), counting the bytes read and written (2 x bytes
// per copy): the machine limit `chorus perf --device cuda` reports against.
Result<double> copyBandwidth(int device, size_t bytes, int reps = 5);

}  // namespace chorus::cuda
