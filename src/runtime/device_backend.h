// The device seam: what a communicator whose ranks sit on accelerators
// asks of the code that drives them. A backend (src/cuda today; another
// vendor's next) lives in its own folder and registers itself by name
// (registerDeviceBackend, called from the one generated registration list
// that src/api/CMakeLists.txt writes from chorus_device_backend() lines);
// the API asks deviceBackend() and never names a vendor, nor tests for one
// with the preprocessor. docs/architecture.md says how to add one.
//
// Two ways a rank runs on a device:
//   - DeviceExecutor: every rank of a world in this process, one verified
//     algorithm's calls launched on the devices (the fast path);
//   - a focus executor (DeviceOptions::focus): one rank whose peers are
//     other processes of this host, its own blocks launched on connections
//     shared with theirs through a ConnectionExchange (processExchange:
//     CUDA IPC handles, shared memory for the step engine);
//   - StagedQueue: a rank whose peers are in other processes, each call's
//     buffers staged through host memory around a host run (the fallback,
//     and every rank's send/recv).
//
// No device headers here: streams are void* (cudaStream_t for CUDA).
// Nothing throws; everything returns a Status.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runtime/exec/conn_exchange.h"
#include "runtime/exec/executor.h"

namespace chorus::runtime {

struct DeviceOptions {
  std::vector<int> rankDevices;  // rank r on device rankDevices[r]
  size_t sliceBytes = 0;         // 0: the algorithm's (ir::sliceBytesOf)
  int slots = 8;                 // messages in flight per connection
  int timeoutMs = 300000;        // a call that makes no progress this long fails (kTimeout)
  int threadsPerBlock = 0;       // device threads per block (0: the backend's default)
  // Blocks per IR threadblock, each with its share of every slice
  // (FlatPlan::lower); 0: the backend's choice (CUDA: from the GPU's SMs;
  // the step engine: 1).
  int instances = 0;
  int hostThreads = 0;  // backends on host threads: how many (0: the backend's default)
  // The slots' layout (an ir::Protocol) whatever the algorithm's; -1: the
  // algorithm's.
  int protocol = -1;
  // >= 0: the executor runs only rank `focus`'s blocks, on
  // rankDevices[focus], one call at a time (enqueueRank), its connections
  // made through `exchange` with the peers' executors, which run theirs.
  int focus = -1;
  std::shared_ptr<ConnectionExchange> exchange;
  // A focus executor: how many ranks' executors run on its GPU at once
  // (this one's included). Their kernels must all be resident together, so
  // the backend's own choices (instances, block size) take 1/gpuSharers of
  // the GPU each.
  int gpuSharers = 1;
};

// Device copies of a set of host calls' buffers (what `chorus run` and
// `chorus perf --device` run device calls on, and check on the host).
class DeviceMirror {
 public:
  virtual ~DeviceMirror() = default;
  // The same calls on the device copies.
  virtual const std::vector<CallArgs>& calls() const = 0;
  virtual Status upload() = 0;    // host -> device, every buffer
  virtual Status download() = 0;  // device -> host, every buffer
};

// One verified algorithm on the devices of a world whose ranks all live in
// this process.
class DeviceExecutor {
 public:
  virtual ~DeviceExecutor() = default;
  // Enqueues one call of every rank, rank r's on streams[r], and returns.
  virtual Status enqueue(const std::vector<CallArgs>& calls, const std::vector<void*>& streams) = 0;
  // A focus executor (DeviceOptions::focus): that rank's call on `stream`.
  // The first call, and one that needs larger slots, meet the peers at the
  // exchange first.
  virtual Status enqueueRank(const CallArgs& call, void* stream) {
    (void)call, (void)stream;
    return Status(StatusCode::kUnsupported, "this executor runs every rank's call together");
  }
  // A call's failure (stalled past the timeout, aborted) without waiting.
  virtual Status asyncError() const = 0;
  // Waits for this executor's launches so far, not for their outcome (safe
  // beside enqueue() on another thread).
  virtual Status waitLaunches() const = 0;
  // Waits for the calls so far and reports (then clears) a failure.
  virtual Status wait() = 0;
  // Ends the running call: its blocks give up at their next wait. Safe from
  // any thread.
  virtual void abort() = 0;
};

// One buffer of a staged call: device memory is copied to the host before
// the run if `in`, back after it if `out`; host memory is used in place.
struct StagedRegion {
  void* data = nullptr;
  size_t bytes = 0;
  bool in = false;
  bool out = false;
};

// A device rank whose peers are in other processes (cuda/staged.h says how
// the CUDA one orders its calls with its streams).
class StagedQueue {
 public:
  virtual ~StagedQueue() = default;
  virtual int device() const = 0;
  // Enqueues one call: `regions` staged, `run` called on the queue's worker
  // with each region's host address (in order), outputs copied back; the
  // first stream carries it, the others are joined to it around it.
  virtual Status enqueue(const std::vector<void*>& streams, std::vector<StagedRegion> regions,
                         std::function<Status(const std::vector<void*>&)> run) = 0;
  // Runs `work` on the worker after every call enqueued before it, and
  // waits for it (split and shrink exchanges stay in order with the calls).
  virtual Status runInOrder(std::function<Status()> work) = 0;
  virtual Status asyncError() const = 0;
  // Waits until every call enqueued so far has passed its stream.
  virtual Status synchronize() = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual std::string_view name() const = 0;  // "cuda"
  // It runs on the host in place of a device (the step engine, "engine"):
  // tools reach it by name; communicators never take it for their devices.
  virtual bool emulated() const { return false; }
  // Devices this process can use; kUnsupported naming why when none.
  virtual Result<int> deviceCount() const = 0;
  // Whether `p` is memory of one of its devices (what host ranks refuse).
  virtual bool isDeviceMemory(const void* p) const = 0;
  virtual Result<std::unique_ptr<DeviceExecutor>> makeExecutor(
      const VerifiedAlgorithm& va, const DeviceOptions& options) const = 0;
  virtual Result<std::unique_ptr<StagedQueue>> makeStagedQueue(int device, int timeoutMs) const = 0;
  // Connection memory for a focus executor of rank `rank` on `device` that
  // the other processes of this host can map, its handles exchanged by
  // `allGather` (every rank's blob, by rank: the processes' bootstrap);
  // `label` is unique to the communicator and the executor (for memory that
  // has names). kUnsupported, saying why, where it cannot be shared.
  virtual Result<std::shared_ptr<ConnectionExchange>> processExchange(
      int device, int rank, const std::string& label, BlobAllGather allGather) const {
    (void)device, (void)rank, (void)label, (void)allGather;
    return Status(StatusCode::kUnsupported,
                  std::string(name()) + " cannot share connections between processes");
  }
  // `bytes` of zeroed memory of `device` that calls may use as a buffer,
  // and its release (what a communicator keeps for a root-only buffer the
  // caller left NULL).
  virtual Result<void*> allocate(int device, size_t bytes) const {
    (void)device, (void)bytes;
    return Status(StatusCode::kUnsupported, std::string(name()) + " allocates no buffers");
  }
  virtual void release(int device, void* p) const { (void)device, (void)p; }
  // A send matched with its receive between two ranks' streams: `bytes`
  // from src to dst once srcStream's earlier work is done; srcStream's later
  // work waits for the copy. Enqueued, not waited for.
  virtual Status copyBetweenStreams(void* dst, int dstDevice, void* dstStream, const void* src,
                                    int srcDevice, void* srcStream, size_t bytes) const = 0;

  // For tools measuring a device (`chorus perf --device`): one line naming
  // it; bytes read and written per second by a large copy on it, and how
  // that was measured; device copies of host calls' buffers, laid out as
  // collective `coll` on `nranks` ranks lays them, all on `device`.
  // kUnsupported where a backend does not offer them.
  virtual Result<std::string> describeDevice(int device) const {
    return std::string(name()) + " device " + std::to_string(device);
  }
  // What names the physical device across processes (ordinals differ with
  // each process's visible devices): ranks with equal identities share it.
  virtual Result<std::string> deviceIdentity(int device) const {
    return std::string(name()) + " device " + std::to_string(device);
  }
  virtual Result<double> copyBandwidth(int device, std::string* how) const {
    (void)device, (void)how;
    return Status(StatusCode::kUnsupported,
                  std::string(name()) + " does not measure its copy bandwidth");
  }
  virtual Result<std::unique_ptr<DeviceMirror>> mirror(const std::vector<CallArgs>& hostCalls,
                                                       CollectiveKind coll, int nranks,
                                                       int device) const {
    (void)hostCalls, (void)coll, (void)nranks, (void)device;
    return Status(StatusCode::kUnsupported, std::string(name()) + " does not mirror host buffers");
  }
};

// Adds a backend (a second one of the same name is refused: kInvalidArgument).
Status registerDeviceBackend(std::unique_ptr<DeviceBackend> backend);
// The backend device communicators use: the first registered that is not
// emulated; nullptr when this build registered none.
const DeviceBackend* deviceBackend();
// The registered backend called `name`, emulated or not; nullptr if none.
const DeviceBackend* deviceBackend(std::string_view name);
// The names of the registered backends, in registration order.
std::vector<std::string> deviceBackendNames();

// Bytes per second of a large memcpy on this host (64 MiB, best of 5, both
// buffers prefaulted): what host ranks' memory traffic is rated against.
double memcpyBandwidth();

}  // namespace chorus::runtime
