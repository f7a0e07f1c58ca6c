#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <utility>

#include "cuda/device_ctx.cuh"
#include "cuda/world.h"
#include "runtime/exec/engine.h"
#include "runtime/exec/flat_plan.h"

namespace chorus::cuda {

using runtime::CallArgs;
using runtime::FlatPlan;
namespace engine = runtime::engine;

namespace {

Status cudaError(cudaError_t e, const std::string& what) {
  return Status(StatusCode::kUnsupported,
                what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

Status focusOnly(int focus) {
  return Status(StatusCode::kInvalidArgument, "this world runs rank " + std::to_string(focus) +
                                                  " alone: enqueueRank takes its calls");
}

#define CHORUS_CUDA_TRY(expr)                                         \
  do {                                                                \
    cudaError_t chorus_e_ = (expr);                                   \
    if (chorus_e_ != cudaSuccess) return cudaError(chorus_e_, #expr); \
  } while (0)

// The word the host and the kernel share (mapped pinned memory).
struct Control {
  int error;  // kStalled once a block waited past the timeout
  int abort;  // set by CudaWorld::abort
};
enum : int { kNoError = 0, kStalled = 1 };

// Up to this many ranks' buffer views travel in the launch's parameters, so
// a launch needs no host-to-device copy and a CUDA graph that captures it
// holds everything it reads (a copy from host memory would be read again,
// from a freed vector, at each replay).
constexpr int kInlineRanks = 16;
struct InlineRanks {
  engine::RankView r[kInlineRanks];
};

// The kernel, one instantiation per block shape: __launch_bounds__ caps
// its registers so that kMinBlocks blocks of kThreads fit on an SM (64K
// registers: 1024 x 1 and 512 x 2 at 64 per thread, 256 x 3 and 128 x 6 at
// 85). A launch uses the smallest shape that holds its block size.
template <int kThreads, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    planKernel(engine::CallView v, const __grid_constant__ InlineRanks inl, const int32_t* blockMap,
               Control* ctl, uint64_t timeoutNs, bool system) {
  if (v.ranks == nullptr) v.ranks = const_cast<engine::RankView*>(inl.r);
  DeviceCtx ctx{system};
  int b = blockMap[blockIdx.x];
  engine::Block<DeviceCtx> blk(ctx, v, b);
  engine::Cursor c = blk.start();
  // The timeout counts how long this block has waited without a step (not
  // whether the whole call moves): a block that waits longer than that
  // behind slow but live peers ends the call too.
  uint64_t idleSince = 0;
  unsigned idle = 0;
  for (;;) {
    engine::StepResult r = blk.tryStep(c);
    if (r == engine::StepResult::kFinished) break;
    if (r == engine::StepResult::kRan) {
      idleSince = 0;
      idle = 0;
      continue;
    }
    bool stop = false;
    // The control word is host memory: read it every 32 idle tries only.
    if (threadIdx.x == 0 && ++idle % 32 == 0) {
      volatile Control* vc = ctl;
      if (vc->abort != 0 || vc->error != kNoError) {
        stop = true;
      } else {
        uint64_t now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (idleSince == 0) {
          idleSince = now;
        } else if (now - idleSince > timeoutNs) {
          vc->error = kStalled;  // only ever 0 -> kStalled: a plain store
          __threadfence_system();
          stop = true;
        }
      }
    }
    if (ctx.any(stop)) break;
    __nanosleep(64);
  }
  blk.finish(c);
}

struct KernelShape {
  int threads;  // the most threads per block it is compiled for
  const void* fn;
};
const KernelShape kShapes[] = {
    {128, reinterpret_cast<const void*>(planKernel<128, 6>)},
    {256, reinterpret_cast<const void*>(planKernel<256, 3>)},
    {512, reinterpret_cast<const void*>(planKernel<512, 2>)},
    {1024, reinterpret_cast<const void*>(planKernel<1024, 1>)},
};

// The kernel that runs blocks of `threads` threads.
const void* kernelFor(int threads) {
  for (const KernelShape& k : kShapes)
    if (threads <= k.threads) return k.fn;
  return kShapes[std::size(kShapes) - 1].fn;
}

// Restores the caller's current device when a call that switches devices
// returns (the C API's users keep launching on their own device).
class DeviceGuard {
 public:
  DeviceGuard() { ok_ = cudaGetDevice(&saved_) == cudaSuccess; }
  ~DeviceGuard() {
    if (ok_) cudaSetDevice(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = 0;
  bool ok_ = false;
};

// Bytes rounded up to 16, so every slot stays aligned.
size_t round16(size_t n) { return (n + 15) / 16 * 16; }

template <typename T>
Status allocOn(int device, T** p, size_t count) {
  CHORUS_CUDA_TRY(cudaSetDevice(device));
  void* raw = nullptr;
  CHORUS_CUDA_TRY(cudaMalloc(&raw, std::max<size_t>(count, 1) * sizeof(T)));
  *p = static_cast<T*>(raw);
  return Status::ok();
}

// On the world's own setup stream (never the legacy one, which would wait
// for other communicators' kernels); syncAll() waits for it.
template <typename T>
Status upload(int device, T** p, const std::vector<T>& v, cudaStream_t setup) {
  if (Status st = allocOn(device, p, v.size()); !st.isOk()) return st;
  if (!v.empty())
    CHORUS_CUDA_TRY(
        cudaMemcpyAsync(*p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, setup));
  return Status::ok();
}

}  // namespace

Result<int> deviceCount() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return cudaError(e, "no CUDA device (cudaGetDeviceCount)");
  if (n == 0) return Status(StatusCode::kUnsupported, "no CUDA device");
  return n;
}

Result<std::string> describeDevice(int d) {
  cudaDeviceProp p{};
  CHORUS_CUDA_TRY(cudaGetDeviceProperties(&p, d));
  return std::string(p.name) + ", " + std::to_string(p.multiProcessorCount) + " SMs, " +
         std::to_string(p.totalGlobalMem >> 30) + " GiB, sm_" + std::to_string(p.major) +
         std::to_string(p.minor);
}

Result<std::string> deviceUuid(int d) {
  cudaDeviceProp p{};
  CHORUS_CUDA_TRY(cudaGetDeviceProperties(&p, d));
  return runtime::hexHandle(std::string(p.uuid.bytes, sizeof p.uuid.bytes));
}

namespace {

// kInvalidArgument unless `p` is device (or managed) memory of `device`.
Status checkDevicePointer(const void* p, int device, int rank, const char* what) {
  cudaPointerAttributes attr{};
  cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(rank) + "'s " + what +
                                                    " is not memory CUDA knows (" +
                                                    cudaGetErrorString(e) + ")");
  }
  if (attr.type == cudaMemoryTypeManaged) return Status::ok();
  if (attr.type != cudaMemoryTypeDevice)
    return Status(StatusCode::kInvalidArgument,
                  "rank " + std::to_string(rank) + "'s " + what +
                      " is host memory; a CUDA communicator takes device pointers");
  if (attr.device != device)
    return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(rank) + "'s " + what +
                                                    " is on GPU " + std::to_string(attr.device) +
                                                    ", the rank runs on GPU " +
                                                    std::to_string(device));
  return Status::ok();
}

}  // namespace

// One GPU's share of a world: its ranks' blocks and the plan's arrays in
// its memory.
struct GpuBlocks {
  int device = 0;
  std::vector<int32_t> blockMap;  // CUDA block -> plan block
  int32_t* dBlockMap = nullptr;
  runtime::PlanStep* dSteps = nullptr;
  runtime::PlanBlock* dBlocks = nullptr;
  int32_t* dRankFirst = nullptr;
  // Kept across calls (engine::CallCounters); zeroed with the connections.
  uint64_t* dCompleted = nullptr;
  uint32_t* dFinished = nullptr;
  engine::CallCounters* dCalls = nullptr;
  engine::RankView* dRanks = nullptr;
  engine::ConnView* dConns = nullptr;
  cudaStream_t stream = nullptr;  // groups after the first: their own stream
  // Recorded after each launch: `done` after an eager one (and
  // `lastStream` where), `captured` after one captured into a CUDA graph
  // (an event recorded in a capture may not be waited for outside it).
  cudaEvent_t done = nullptr;
  cudaEvent_t captured = nullptr;
  cudaStream_t lastStream = nullptr;
  bool launched = false;
  bool lastCaptured = false;  // the last launch was captured
};

// Whether work enqueued on `s` now is being captured into a CUDA graph.
Result<bool> capturing(cudaStream_t s) {
  cudaStreamCaptureStatus c = cudaStreamCaptureStatusNone;
  CHORUS_CUDA_TRY(cudaStreamIsCapturing(s, &c));
  return c != cudaStreamCaptureStatusNone;
}

// `s` waits for `e`, last recorded on `from`. Nothing to do on the same
// stream (stream order). A capture waits for an event that is not one of
// its own records (`inCapture`: recorded by this capture as a plain
// record) as an external wait; a plain one fails with
// cudaErrorStreamCaptureIsolation.
Status waitFor(cudaStream_t s, cudaEvent_t e, cudaStream_t from, bool inCapture) {
  if (s == from) return Status::ok();
  Result<bool> cap = capturing(s);
  if (!cap.isOk()) return cap.status();
  CHORUS_CUDA_TRY(cudaStreamWaitEvent(
      s, e, cap.value() && !inCapture ? cudaEventWaitExternal : cudaEventWaitDefault));
  return Status::ok();
}

struct CudaWorld::Impl {
  const runtime::VerifiedAlgorithm* va = nullptr;
  CudaOptions o;
  FlatPlan plan;
  std::vector<int> rankDevice;
  bool multiDevice = false;  // ranks on more than one GPU: system-scope ordering
  // Whether this world launches rank r's blocks (all, or the focus's).
  bool runs(int r) const { return o.focus < 0 || r == o.focus; }
  Status broken;  // a focus world after a failed call
  std::vector<GpuBlocks> groups;
  std::map<int, size_t> groupOf;  // device -> group
  // Per device of the world: a non-blocking stream for its uploads and
  // zeroing, so that waiting for them never waits for other work there.
  std::map<int, cudaStream_t> setup;
  // Connections: counters and slots in the receiving rank's memory.
  std::vector<engine::ConnCounters*> counters;
  std::vector<unsigned char*> slots;
  // The largest message the connections hold (focus worlds: the largest
  // slice, runtime::connSlotBytes), and their slots' size (every rank here).
  size_t msgBytes = 0, slotBytes = 0;
  std::vector<unsigned char*> scratch;  // per rank
  std::vector<size_t> scratchBytes;
  Control* ctl = nullptr;  // mapped pinned memory
  Control* dCtl = nullptr;
  engine::BlockPos* positions = nullptr;  // mapped pinned memory
  engine::BlockPos* dPositions = nullptr;
  int maxResident = 0;
  int threads = 0;        // CUDA threads per block
  int launchThreads = 0;  // this call's: `threads`, or a warp for a small call
  cudaEvent_t fork = nullptr;
  std::vector<cudaEvent_t> before;  // per rank, on its device: what its stream held

  bool allocated = false;     // connections made for msgBytes
  bool everCaptured = false;  // a call was captured: its graph holds the buffers
  // kUnsupported where buffers may not move: while capturing, or once a
  // graph holds them (`what` names the growth).
  Status mayMove(bool capturingNow, const std::string& what) const;
  // The failure (timeout, abort) of a call wait() has not reported yet.
  Status pendingFailure() const {
    const char* why = __atomic_load_n(&ctl->abort, __ATOMIC_ACQUIRE) != 0 ? "was aborted"
                      : __atomic_load_n(&ctl->error, __ATOMIC_ACQUIRE) != kNoError
                          ? "made no progress"
                          : nullptr;
    if (why == nullptr) return Status::ok();
    return Status(why[0] == 'w' ? StatusCode::kAborted : StatusCode::kTimeout,
                  std::string("a previous call of this world ") + why +
                      "; wait() reports it and resets the world before the next call");
  }
  Status growConnections(size_t bytes, bool capturingNow);
  Status reallocateConnections(size_t bytes);
  Status launchGroup(size_t i, const std::vector<engine::RankView>& ranks,
                     const std::vector<CallArgs>& calls, const runtime::Geometry& g,
                     cudaStream_t s);
  // Copies the call's rank views (if they do not travel inline) and launches every
  // group's kernel, group i on streams[i].
  Status launch(const std::vector<CallArgs>& calls, const runtime::Geometry& g,
                const std::vector<cudaStream_t>& streams);
  // `s` waits for group `grp`'s launch of the call just enqueued.
  Status join(cudaStream_t s, const GpuBlocks& grp) const {
    if (grp.lastCaptured) {  // a join inside the capture
      CHORUS_CUDA_TRY(cudaStreamWaitEvent(s, grp.captured, 0));
      return Status::ok();
    }
    return waitFor(s, grp.done, grp.lastStream, false);
  }
  // checkDevicePointer once per pointer and device: a training loop calls
  // with the same few buffers, and each check is a driver call (16 per
  // call at 8 ranks). Bounded: the cache starts over when full.
  std::vector<std::pair<const void*, int>> checked;
  Status checkPointer(const void* p, int device, int rank, const char* what) {
    std::pair<const void*, int> key{p, device};
    if (std::find(checked.begin(), checked.end(), key) != checked.end()) return Status::ok();
    if (Status st = checkDevicePointer(p, device, rank, what); !st.isOk()) return st;
    if (checked.size() >= 64) checked.clear();
    checked.push_back(key);
    return Status::ok();
  }
  // planCall, the pointer checks and the growth every enqueue does first.
  Result<runtime::Geometry> prepare(const std::vector<CallArgs>& calls, bool capturingNow);
  Status growScratch(int rank, size_t bytes, bool capturingNow);
  // Waits for this world's own work (its last launch on each GPU, its
  // uploads), never the whole device: other communicators' kernels, a
  // staged rank's wait for a remote peer among them, are not ours to wait for.
  Status syncAll();
  void release();
};

CudaWorld::CudaWorld() : impl_(std::make_unique<Impl>()) {}

CudaWorld::~CudaWorld() { impl_->release(); }

void CudaWorld::Impl::release() {
  (void)syncAll();
  for (GpuBlocks& g : groups) {
    cudaSetDevice(g.device);
    for (void* p :
         {static_cast<void*>(g.dBlockMap), static_cast<void*>(g.dSteps),
          static_cast<void*>(g.dBlocks), static_cast<void*>(g.dRankFirst),
          static_cast<void*>(g.dCompleted), static_cast<void*>(g.dFinished),
          static_cast<void*>(g.dCalls), static_cast<void*>(g.dRanks), static_cast<void*>(g.dConns)})
      if (p != nullptr) cudaFree(p);
    if (g.stream != nullptr) cudaStreamDestroy(g.stream);
    if (g.done != nullptr) cudaEventDestroy(g.done);
    if (g.captured != nullptr) cudaEventDestroy(g.captured);
  }
  groups.clear();
  for (auto* p : counters)
    if (p != nullptr) cudaFree(p);
  for (auto* p : slots)
    if (p != nullptr) cudaFree(p);
  for (auto* p : scratch)
    if (p != nullptr) cudaFree(p);
  counters.clear();
  slots.clear();
  scratch.clear();
  if (ctl != nullptr) cudaFreeHost(ctl);
  if (positions != nullptr) cudaFreeHost(positions);
  if (fork != nullptr) cudaEventDestroy(fork);
  for (cudaEvent_t e : before) cudaEventDestroy(e);
  before.clear();
  for (auto& [d, s] : setup) {
    cudaSetDevice(d);
    cudaStreamDestroy(s);
  }
  setup.clear();
  ctl = nullptr;
  positions = nullptr;
}

Status CudaWorld::Impl::syncAll() {
  // Every wait is made even after one fails (release() frees what they
  // guard); the first failure is returned.
  Status first;
  auto keep = [&first](cudaError_t e, const char* what) {
    if (e == cudaSuccess || !first.isOk()) return;
    Status failed = cudaError(e, what);  // (swapped in: nvcc refuses a discarded Status& from =)
    std::swap(first, failed);
  };
  for (const GpuBlocks& g : groups) {
    keep(cudaSetDevice(g.device), "cudaSetDevice");
    if (g.done != nullptr) keep(cudaEventSynchronize(g.done), "cudaEventSynchronize");
  }
  for (const auto& [d, s] : setup) {
    keep(cudaSetDevice(d), "cudaSetDevice");
    keep(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }
  return first;
}

Result<std::unique_ptr<CudaWorld>> CudaWorld::make(const runtime::VerifiedAlgorithm& va,
                                                   const CudaOptions& options) {
  if (options.slots < 1) return Status(StatusCode::kInvalidArgument, "slots must be >= 1");
  if (options.threadsPerBlock != 0 &&
      (options.threadsPerBlock < 32 || options.threadsPerBlock > 1024 ||
       options.threadsPerBlock % 32 != 0))
    return Status(StatusCode::kInvalidArgument,
                  "threads per block must be a multiple of 32 in [32, 1024] (0: chosen)");
  if (options.timeoutMs < 1) return Status(StatusCode::kInvalidArgument, "timeout must be >= 1 ms");
  if (options.gpuSharers < 1 || (options.focus < 0 && options.gpuSharers != 1))
    return Status(StatusCode::kInvalidArgument,
                  "gpuSharers " + std::to_string(options.gpuSharers) +
                      ": it counts the worlds with a focus rank on one GPU (at least 1); a "
                      "world of every rank has 1");
  Result<int> ndev = deviceCount();
  if (!ndev.isOk()) return ndev.status();
  DeviceGuard guard;
  const ir::Algorithm& a = va.algo();
  if (a.totalThreadblocks() == 0)
    return Status(StatusCode::kInvalidArgument,
                  "algorithm '" + a.name + "' has no threadblocks to run");
  std::unique_ptr<CudaWorld> w(new CudaWorld());
  Impl& m = *w->impl_;
  m.va = &va;
  m.o = options;
  m.plan = FlatPlan::lower(va);
  if (!options.rankDevices.empty() && static_cast<int>(options.rankDevices.size()) != a.ngpus)
    return Status(StatusCode::kInvalidArgument,
                  "rankDevices names " + std::to_string(options.rankDevices.size()) +
                      " devices for an algorithm of " + std::to_string(a.ngpus) + " ranks");
  if (options.focus < -1 || options.focus >= a.ngpus)
    return Status(StatusCode::kInvalidArgument,
                  "focus " + std::to_string(options.focus) + " is not a rank of '" + a.name + "'");
  if (options.focus >= 0 && (options.exchange == nullptr || !options.rankDevices.empty()))
    return Status(StatusCode::kInvalidArgument,
                  "a focus rank runs on `device` and needs a connection exchange");
  if (options.focus >= 0 && a.ranks[static_cast<size_t>(options.focus)].tbs.empty())
    return Status(StatusCode::kUnsupported, "rank " + std::to_string(options.focus) +
                                                " has no threadblocks in '" + a.name +
                                                "': a world of its own would launch nothing");
  m.rankDevice = options.rankDevices.empty()
                     ? std::vector<int>(static_cast<size_t>(a.ngpus), options.device)
                     : options.rankDevices;
  // Peers in other processes may be on other GPUs: system scope.
  m.multiDevice = options.focus >= 0 || std::any_of(m.rankDevice.begin(), m.rankDevice.end(),
                                                    [&](int d) { return d != m.rankDevice[0]; });
  for (int d : m.rankDevice)
    if (d < 0 || d >= ndev.value())
      return Status(StatusCode::kInvalidArgument, "no CUDA device " + std::to_string(d) +
                                                      " (this process sees " +
                                                      std::to_string(ndev.value()) + ")");
  if (options.protocol < -1 || options.protocol > static_cast<int>(ir::Protocol::kLL128))
    return Status(StatusCode::kInvalidArgument,
                  "no protocol " + std::to_string(options.protocol) + " (-1: the algorithm's)");
  if (options.instances < 0 || options.instances > runtime::kMostInstances)
    return Status(StatusCode::kInvalidArgument, "instances must be in [1, " +
                                                    std::to_string(runtime::kMostInstances) +
                                                    "] (0: chosen from the GPU)");
  const int sharers = options.gpuSharers;
  std::map<int, int> baseOn;  // device -> blocks of one instance
  for (const runtime::PlanBlock& pb : m.plan.blocks)
    if (m.runs(pb.rank)) ++baseOn[m.rankDevice[static_cast<size_t>(pb.rank)]];
  std::map<int, std::pair<int, int>> smsAndPerSm;  // device -> (SMs, blocks per SM) at m.threads
  auto measure = [&](int threads) -> Status {
    for (auto [d, n] : baseOn) {
      cudaDeviceProp p{};
      CHORUS_CUDA_TRY(cudaGetDeviceProperties(&p, d));
      CHORUS_CUDA_TRY(cudaSetDevice(d));
      int perSm = 0;
      CHORUS_CUDA_TRY(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernelFor(threads), threads, 0));
      smsAndPerSm[d] = {p.multiProcessorCount, perSm};
    }
    return Status::ok();
  };
  // Block size: the caller's, or kDefaultThreads unless one instance's
  // blocks only fit at smaller blocks (files of 448 blocks at 8 ranks on
  // one GPU: more blocks per SM, each with fewer threads).
  m.threads = options.threadsPerBlock;
  for (int t = kDefaultThreads; m.threads == 0; t /= 2) {
    if (Status st = measure(t); !st.isOk()) return st;
    // One instance's blocks, or the caller's instances of them, for each
    // world sharing the GPU.
    const int k = std::max(options.instances, 1);
    bool fits = std::all_of(baseOn.begin(), baseOn.end(), [&](const auto& dn) {
      auto [sms, perSm] = smsAndPerSm[dn.first];
      return residentTogether(static_cast<long>(dn.second) * k, sharers, sms, perSm);
    });
    if (fits || t / 2 < kFewestThreads) m.threads = t;
  }
  if (options.threadsPerBlock != 0)  // (the choice above measured its own)
    if (Status st = measure(m.threads); !st.isOk()) return st;
  // Instances (FlatPlan::lower): as many as put a block on every SM of the
  // busiest GPU (its share of them, beside other worlds on it), at most
  // kAutoInstances, unless the caller says.
  int instances = options.instances;
  if (instances == 0) {
    instances = kAutoInstances;
    for (auto [d, n] : baseOn) {
      auto [sms, perSm] = smsAndPerSm[d];
      instances = std::min(instances, autoInstances(n, sharers, sms, perSm));
    }
  }
  if (instances > 1) m.plan = FlatPlan::lower(va, instances);
  if (options.protocol >= 0) m.plan.protocol = static_cast<ir::Protocol>(options.protocol);
  for (size_t b = 0; b < m.plan.blocks.size(); ++b) {
    if (!m.runs(m.plan.blocks[b].rank)) continue;
    int d = m.rankDevice[static_cast<size_t>(m.plan.blocks[b].rank)];
    auto [it, added] = m.groupOf.try_emplace(d, m.groups.size());
    if (added) {
      GpuBlocks g;
      g.device = d;
      m.groups.push_back(g);
    }
    m.groups[it->second].blockMap.push_back(static_cast<int32_t>(b));
  }
  // Peers on other GPUs read and write each other's memory directly.
  for (const GpuBlocks& g : m.groups)
    for (const GpuBlocks& h : m.groups) {
      if (g.device == h.device) continue;
      int can = 0;
      CHORUS_CUDA_TRY(cudaDeviceCanAccessPeer(&can, g.device, h.device));
      if (!can)
        return Status(StatusCode::kUnsupported, "GPU " + std::to_string(g.device) +
                                                    " cannot access GPU " +
                                                    std::to_string(h.device) + "'s memory");
      CHORUS_CUDA_TRY(cudaSetDevice(g.device));
      cudaError_t e = cudaDeviceEnablePeerAccess(h.device, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
      } else if (e != cudaSuccess) {
        return cudaError(e, "cudaDeviceEnablePeerAccess");
      }
    }
  // Every block of a launch must be resident at once: a block that waits
  // for one that never starts would wait for ever.
  for (const GpuBlocks& g : m.groups) {
    cudaDeviceProp p{};
    CHORUS_CUDA_TRY(cudaGetDeviceProperties(&p, g.device));
    CHORUS_CUDA_TRY(cudaSetDevice(g.device));
    int perSm = smsAndPerSm[g.device].second;
    int resident = perSm * p.multiProcessorCount;
    if (&g == &m.groups.front()) m.maxResident = resident;
    const size_t need = g.blockMap.size() * static_cast<size_t>(sharers);
    if (!residentTogether(static_cast<long>(g.blockMap.size()), sharers, p.multiProcessorCount,
                          perSm))
      return Status(StatusCode::kInvalidArgument,
                    "algorithm '" + a.name + "' needs " + std::to_string(need) +
                        " blocks resident at once on GPU " + std::to_string(g.device) + " (" +
                        (sharers > 1 ? std::to_string(g.blockMap.size()) + " for each of the " +
                                           std::to_string(sharers) + " ranks on it; "
                                     : std::string()) +
                        p.name + "), which holds " + std::to_string(resident) + " (" +
                        std::to_string(perSm) + " per SM x " +
                        std::to_string(p.multiProcessorCount) + " SMs at " +
                        std::to_string(m.threads) +
                        " threads per block); use fewer ranks per GPU or fewer threads per block");
    int coop = 0;
    CHORUS_CUDA_TRY(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, g.device));
    if (!coop)
      return Status(StatusCode::kUnsupported,
                    std::string("GPU ") + p.name + " cannot launch cooperative kernels");
  }
  CHORUS_CUDA_TRY(cudaSetDevice(m.groups.front().device));
  CHORUS_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&m.ctl), sizeof(Control),
                                cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(m.ctl, 0, sizeof(Control));
  CHORUS_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.dCtl), m.ctl, 0));
  size_t nblocks = m.plan.blocks.size();
  CHORUS_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&m.positions),
                                std::max<size_t>(nblocks, 1) * sizeof(engine::BlockPos),
                                cudaHostAllocMapped | cudaHostAllocPortable));
  std::fill(m.positions, m.positions + std::max<size_t>(nblocks, 1), engine::BlockPos{});
  CHORUS_CUDA_TRY(
      cudaHostGetDevicePointer(reinterpret_cast<void**>(&m.dPositions), m.positions, 0));
  CHORUS_CUDA_TRY(cudaEventCreateWithFlags(&m.fork, cudaEventDisableTiming));
  for (int d : m.rankDevice) {
    if (m.setup.count(d) != 0) continue;
    CHORUS_CUDA_TRY(cudaSetDevice(d));
    cudaStream_t s = nullptr;
    CHORUS_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    m.setup[d] = s;
  }
  for (size_t i = 0; i < m.groups.size(); ++i) {
    GpuBlocks& g = m.groups[i];
    cudaStream_t su = m.setup.at(g.device);
    if (Status st = upload(g.device, &g.dBlockMap, g.blockMap, su); !st.isOk()) return st;
    if (Status st = upload(g.device, &g.dSteps, m.plan.steps, su); !st.isOk()) return st;
    if (Status st = upload(g.device, &g.dBlocks, m.plan.blocks, su); !st.isOk()) return st;
    if (Status st = upload(g.device, &g.dRankFirst, m.plan.rankFirstBlock, su); !st.isOk())
      return st;
    if (Status st = allocOn(g.device, &g.dCompleted, nblocks); !st.isOk()) return st;
    if (Status st = allocOn(g.device, &g.dFinished, static_cast<size_t>(a.ngpus)); !st.isOk())
      return st;
    if (Status st = allocOn(g.device, &g.dCalls, 1); !st.isOk()) return st;
    if (Status st = allocOn(g.device, &g.dRanks, static_cast<size_t>(a.ngpus)); !st.isOk())
      return st;
    if (Status st = allocOn(g.device, &g.dConns, m.plan.conns.size()); !st.isOk()) return st;
    CHORUS_CUDA_TRY(cudaEventCreateWithFlags(&g.done, cudaEventDisableTiming));
    CHORUS_CUDA_TRY(cudaEventCreateWithFlags(&g.captured, cudaEventDisableTiming));
    if (i > 0) CHORUS_CUDA_TRY(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
  }
  for (int d : m.rankDevice) {
    CHORUS_CUDA_TRY(cudaSetDevice(d));
    cudaEvent_t e = nullptr;
    CHORUS_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    m.before.push_back(e);
  }
  m.counters.assign(m.plan.conns.size(), nullptr);
  m.slots.assign(m.plan.conns.size(), nullptr);
  m.scratch.assign(static_cast<size_t>(a.ngpus), nullptr);
  m.scratchBytes.assign(static_cast<size_t>(a.ngpus), 0);
  // The uploads above may still be in flight on the setup streams.
  if (Status st = m.syncAll(); !st.isOk()) return st;
  return Result<std::unique_ptr<CudaWorld>>(std::move(w));
}

// Whether buffers may be moved now (not while capturing, nor once a graph
// holds them).
Status CudaWorld::Impl::mayMove(bool capturingNow, const std::string& what) const {
  if (capturingNow)
    return Status(StatusCode::kUnsupported,
                  "a call captured into a CUDA graph needs " + what +
                      " made already (synchronizing and allocating are not allowed while a "
                      "stream is captured): make one call of this size before capturing");
  if (everCaptured)
    return Status(StatusCode::kUnsupported,
                  "this world's calls were captured into a CUDA graph, whose launches hold its "
                  "buffers; this call needs " +
                      what +
                      ", which would move them: make the largest call before capturing, or a "
                      "new communicator for larger calls");
  return Status::ok();
}

Status CudaWorld::Impl::growConnections(size_t bytes, bool capturingNow) {
  if (allocated && bytes <= msgBytes) return Status::ok();
  // A stalled call's reset keeps the sizes (and so the buffers a graph
  // holds); growth moves the slots.
  if (capturingNow || bytes > msgBytes) {
    if (Status st =
            mayMove(capturingNow, "connections for " + std::to_string(bytes) + "-byte messages (" +
                                      std::to_string(msgBytes) + " so far)");
        !st.isOk())
      return st;
  }
  // Half-made connections are never used: the next call starts afresh.
  allocated = false;
  if (Status st = reallocateConnections(std::max(bytes, msgBytes)); !st.isOk()) return st;
  // The zeroing and uploads may still be in flight on the setup streams.
  if (Status st = syncAll(); !st.isOk()) return st;
  allocated = true;
  return Status::ok();
}

Status CudaWorld::Impl::reallocateConnections(size_t bytes) {
  if (Status st = syncAll(); !st.isOk()) return st;
  std::vector<engine::ConnView> views;
  if (o.focus >= 0) {
    // Every rank grows at the same call (the same sizes), after its own
    // GPU work is done: the exchange meets, and the regions it replaces are
    // no longer in use anywhere when it returns.
    // (`bytes` is the slice here: every rank computes it alike.)
    msgBytes = bytes;
    auto made =
        runtime::exchangeConnections(plan, o.focus, plan.protocol, msgBytes, o.slots, *o.exchange);
    if (!made.isOk()) return made.status();
    views = std::move(made).value();
  } else {
    // The same sizes (a reset after a stalled call): zero what is there, so
    // that launches a CUDA graph holds keep their pointers.
    const bool same = msgBytes == bytes &&
                      std::none_of(counters.begin(), counters.end(),
                                   [](const engine::ConnCounters* c) { return c == nullptr; });
    msgBytes = bytes;
    slotBytes = round16(engine::slotBytesFor(plan.protocol, msgBytes));
    views.resize(plan.conns.size());
    for (size_t c = 0; c < plan.conns.size(); ++c) {
      int d = rankDevice[static_cast<size_t>(plan.conns[c].to)];
      CHORUS_CUDA_TRY(cudaSetDevice(d));
      if (!same) {
        if (counters[c] != nullptr) cudaFree(counters[c]);
        if (slots[c] != nullptr) cudaFree(slots[c]);
        counters[c] = nullptr;
        slots[c] = nullptr;
        if (Status st = allocOn(d, &counters[c], 1); !st.isOk()) return st;
        if (Status st = allocOn(d, &slots[c], slotBytes * static_cast<size_t>(o.slots)); !st.isOk())
          return st;
      }
      CHORUS_CUDA_TRY(cudaMemsetAsync(counters[c], 0, sizeof(engine::ConnCounters), setup.at(d)));
      CHORUS_CUDA_TRY(
          cudaMemsetAsync(slots[c], 0, slotBytes * static_cast<size_t>(o.slots), setup.at(d)));
      views[c] = engine::ConnView{counters[c], slots[c], slotBytes};
    }
  }
  // Every group's counters start afresh with its connections.
  for (GpuBlocks& g : groups) {
    CHORUS_CUDA_TRY(cudaSetDevice(g.device));
    cudaStream_t su = setup.at(g.device);
    CHORUS_CUDA_TRY(cudaMemsetAsync(g.dCompleted, 0, plan.blocks.size() * sizeof(uint64_t), su));
    CHORUS_CUDA_TRY(
        cudaMemsetAsync(g.dFinished, 0, static_cast<size_t>(plan.nranks) * sizeof(uint32_t), su));
    CHORUS_CUDA_TRY(cudaMemsetAsync(g.dCalls, 0, sizeof(engine::CallCounters), su));
    if (!views.empty())
      CHORUS_CUDA_TRY(cudaMemcpyAsync(g.dConns, views.data(),
                                      views.size() * sizeof(engine::ConnView),
                                      cudaMemcpyHostToDevice, su));
  }
  return Status::ok();
}

Status CudaWorld::Impl::growScratch(int rank, size_t bytes, bool capturingNow) {
  auto r = static_cast<size_t>(rank);
  if (bytes <= scratchBytes[r]) return Status::ok();
  if (Status st = mayMove(capturingNow, "more scratch for rank " + std::to_string(rank) + " (" +
                                            std::to_string(bytes) + " bytes)");
      !st.isOk())
    return st;
  if (Status st = syncAll(); !st.isOk()) return st;
  if (scratch[r] != nullptr) cudaFree(scratch[r]);
  scratch[r] = nullptr;
  scratchBytes[r] = 0;
  if (Status st = allocOn(rankDevice[r], &scratch[r], bytes); !st.isOk()) return st;
  scratchBytes[r] = bytes;
  return Status::ok();
}

Result<runtime::Geometry> CudaWorld::Impl::prepare(const std::vector<CallArgs>& calls,
                                                   bool capturingNow) {
  // A failed call (stalled, aborted) leaves the connections mid-way until
  // wait() reports it and resets them: refuse calls until then.
  if (Status st = pendingFailure(); !st.isOk()) return st;
  if (!broken.isOk()) return broken;
  if (capturingNow) everCaptured = true;
  Result<runtime::Geometry> planned =
      o.focus >= 0
          ? runtime::planRankCall(*va, o.focus, calls[static_cast<size_t>(o.focus)], o.sliceBytes)
          : runtime::planCall(*va, calls, o.sliceBytes);
  if (!planned.isOk()) return planned.status();
  runtime::Geometry g = planned.value();
  plan.splitSlices(&g);
  size_t nranks = static_cast<size_t>(plan.nranks);
  for (size_t r = 0; r < nranks; ++r) {
    if (calls[r].count == 0 || !runs(static_cast<int>(r))) continue;
    int d = rankDevice[r];
    if (Status st = checkPointer(calls[r].sendbuff, d, static_cast<int>(r), "sendbuff"); !st.isOk())
      return st;
    if (Status st = checkPointer(calls[r].recvbuff, d, static_cast<int>(r), "recvbuff"); !st.isOk())
      return st;
  }
  // Ranks apart size their connections by the slice, which all compute
  // alike, so all grow at the same call (runtime::connSlotBytes).
  const size_t need = o.focus >= 0 ? g.largestSliceBytes() : plan.largestMessageBytes(g);
  if (Status st = growConnections(need, capturingNow); !st.isOk()) {
    if (o.focus >= 0) broken = st;  // the peers may have exchanged: they are out of step
    return st;
  }
  for (size_t r = 0; r < nranks; ++r) {
    if (!runs(static_cast<int>(r))) continue;
    if (Status st = growScratch(static_cast<int>(r), plan.scratchBytes(static_cast<int>(r), g),
                                capturingNow);
        !st.isOk())
      return st;
  }
  return g;
}

Status CudaWorld::Impl::launch(const std::vector<CallArgs>& calls, const runtime::Geometry& g,
                               const std::vector<cudaStream_t>& streams) {
  size_t nranks = static_cast<size_t>(plan.nranks);
  // A call whose messages a warp moves in one round of its unrolled loop
  // runs a warp per block, unless the caller chose the block size: its
  // barriers and votes are a warp's, not 8 warps'. Counted in whole chunks
  // (what one instance would send), not the slices cut for instances, so a
  // large call split over many instances keeps its full blocks.
  const size_t chunkMessage = static_cast<size_t>(plan.maxCount()) * g.chunkElems * g.elemSize;
  const size_t warpLimit =
      plan.protocol == ir::Protocol::kSimple ? kWarpMessageBytes : kWarpPacketMessageBytes;
  launchThreads = o.threadsPerBlock == 0 && chunkMessage <= warpLimit ? 32 : threads;
  std::vector<engine::RankView> ranks(nranks);
  // (prepare() grew each rank's scratch for this call.)
  for (size_t r = 0; r < nranks; ++r)
    if (runs(static_cast<int>(r)))
      ranks[r] = engine::rankView(plan, static_cast<int>(r), calls[r], scratch[r]);
  // Calls of one world run one after another whatever streams they come
  // on (they share the rank views, counters and slots): every group waits
  // for the previous call's kernels on every GPU. All the waits come before
  // any launch: one call's groups must run at once, not one after another.
  for (size_t i = 0; i < groups.size(); ++i) {
    CHORUS_CUDA_TRY(cudaSetDevice(groups[i].device));
    for (const GpuBlocks& h : groups)
      if (h.launched)
        if (Status st = waitFor(streams[i], h.done, h.lastStream, false); !st.isOk()) return st;
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    Status st = launchGroup(i, ranks, calls, g, streams[i]);
    if (st.isOk()) continue;
    Result<bool> cap = capturing(streams[i]);
    if (i > 0 && cap.isOk() && !cap.value()) {
      // Groups already launched wait for peers that will never start: stop them.
      __atomic_store_n(&ctl->abort, 1, __ATOMIC_SEQ_CST);
      return Status(st.code(),
                    st.message() + " (after " + std::to_string(i) +
                        " GPU(s) had started the call: it was aborted; wait() reports it)");
    }
    if (i > 0)
      return Status(st.code(),
                    st.message() + " (while capturing, after " + std::to_string(i) +
                        " GPU(s)' launches: the graph holds part of a call; discard it)");
    return st;
  }
  return Status::ok();
}

Status CudaWorld::Impl::launchGroup(size_t i, const std::vector<engine::RankView>& ranks,
                                    const std::vector<CallArgs>& calls, const runtime::Geometry& g,
                                    cudaStream_t s) {
  size_t nranks = ranks.size();
  GpuBlocks& grp = groups[i];
  {
    CHORUS_CUDA_TRY(cudaSetDevice(grp.device));
    InlineRanks inl{};
    const bool inlined = nranks <= static_cast<size_t>(kInlineRanks);
    if (inlined) {
      std::copy(ranks.begin(), ranks.end(), inl.r);
    } else {
      Result<bool> cap = capturing(s);
      if (!cap.isOk()) return cap.status();
      if (cap.value())
        return Status(StatusCode::kUnsupported,
                      "a CUDA graph can capture calls of worlds of up to " +
                          std::to_string(kInlineRanks) + " ranks per GPU; this one has " +
                          std::to_string(nranks));
      CHORUS_CUDA_TRY(cudaMemcpyAsync(grp.dRanks, ranks.data(), nranks * sizeof(engine::RankView),
                                      cudaMemcpyHostToDevice, s));
    }
    engine::CallView v;
    v.steps = grp.dSteps;
    v.blocks = grp.dBlocks;
    v.rankFirstBlock = grp.dRankFirst;
    v.conns = grp.dConns;
    v.ranks = inlined ? nullptr : grp.dRanks;
    v.completed = grp.dCompleted;
    v.ranksFinished = grp.dFinished;
    v.calls = grp.dCalls;
    v.groupBlocks = static_cast<int32_t>(grp.blockMap.size());
    v.positions = dPositions;
    v.g = g;
    v.type = calls[0].type;
    v.op = calls[0].op;
    v.protocol = plan.protocol;
    v.nslots = o.slots;
    v.instances = plan.instances;
    const int32_t* map = grp.dBlockMap;
    Control* c = dCtl;
    uint64_t timeoutNs = static_cast<uint64_t>(o.timeoutMs) * 1000000ull;
    // System scope only where some rank's connections cross GPUs.
    bool system = multiDevice;
    void* args[] = {&v, &inl, &map, &c, &timeoutNs, &system};
    const dim3 grid(static_cast<unsigned>(grp.blockMap.size()));
    const dim3 block(static_cast<unsigned>(launchThreads));
    // A whole world's blocks are one cooperative launch: CUDA refuses it
    // rather than start fewer blocks than it has. A focus world's kernel
    // must run beside its peers' worlds' kernels on the same GPU, which a
    // cooperative launch need not do (Cuda.RanksApartShareConnectionsOnOne-
    // Gpu hung on an H200 with four worlds well within the GPU; this plain
    // launch is the fix to check there next): residency is checked at
    // make() against the world's share of the GPU (gpuSharers).
    if (o.focus >= 0) {
      CHORUS_CUDA_TRY(cudaLaunchKernel(kernelFor(threads), grid, block, args, 0, s));
    } else {
      CHORUS_CUDA_TRY(cudaLaunchCooperativeKernel(kernelFor(threads), grid, block, args, 0, s));
    }
    Result<bool> cap = capturing(s);
    if (!cap.isOk()) return cap.status();
    grp.lastCaptured = cap.value();
    if (cap.value()) {
      CHORUS_CUDA_TRY(cudaEventRecord(grp.captured, s));
    } else {
      CHORUS_CUDA_TRY(cudaEventRecord(grp.done, s));
      grp.lastStream = s;
      grp.launched = true;
    }
  }
  return Status::ok();
}

Status CudaWorld::enqueue(const std::vector<CallArgs>& calls, void* stream) {
  if (impl_->o.focus >= 0) return focusOnly(impl_->o.focus);
  return enqueueOn(calls, stream);
}

Status CudaWorld::enqueueRank(const CallArgs& call, void* stream) {
  const int me = impl_->o.focus;
  if (me < 0)
    return Status(StatusCode::kInvalidArgument, "enqueueRank needs a world with a focus rank");
  std::vector<CallArgs> calls(static_cast<size_t>(impl_->plan.nranks));
  for (CallArgs& c : calls) {  // the others' calls are their processes'
    c.type = call.type;
    c.op = call.op;
  }
  calls[static_cast<size_t>(me)] = call;
  return enqueueOn(calls, stream);
}

Status CudaWorld::enqueueOn(const std::vector<CallArgs>& calls, void* stream) {
  DeviceGuard guard;
  Impl& m = *impl_;
  auto main = static_cast<cudaStream_t>(stream);
  CHORUS_CUDA_TRY(cudaSetDevice(m.groups.front().device));
  Result<bool> cap = capturing(main);
  if (!cap.isOk()) return cap.status();
  Result<runtime::Geometry> g = m.prepare(calls, cap.value());
  if (!g.isOk()) {
    // A focus rank that fails here leaves its peers without it: they hear
    // of it at their next exchange rather than waiting there.
    if (m.o.focus >= 0) {
      m.broken = g.status();
      m.o.exchange->abandon(g.status());
    }
    return g.status();
  }
  // The first group runs on `stream`; the others on their own streams,
  // forked from it and joined back into it by events.
  std::vector<cudaStream_t> streams{main};
  for (size_t i = 1; i < m.groups.size(); ++i) streams.push_back(m.groups[i].stream);
  CHORUS_CUDA_TRY(cudaSetDevice(m.groups.front().device));
  if (m.groups.size() > 1) {
    CHORUS_CUDA_TRY(cudaEventRecord(m.fork, main));
    for (size_t i = 1; i < m.groups.size(); ++i) {
      CHORUS_CUDA_TRY(cudaSetDevice(m.groups[i].device));
      CHORUS_CUDA_TRY(cudaStreamWaitEvent(streams[i], m.fork, 0));
    }
  }
  Status launched = m.launch(calls, g.value(), streams);
  // Joined back even after a failed launch: a capture ends only with every
  // forked stream joined.
  CHORUS_CUDA_TRY(cudaSetDevice(m.groups.front().device));
  for (size_t i = 1; i < m.groups.size(); ++i) {
    if (launched.isOk()) {
      if (Status st = m.join(main, m.groups[i]); !st.isOk()) return st;
    } else if (cap.value()) {
      CHORUS_CUDA_TRY(cudaSetDevice(m.groups[i].device));
      CHORUS_CUDA_TRY(cudaEventRecord(m.groups[i].captured, streams[i]));
      CHORUS_CUDA_TRY(cudaSetDevice(m.groups.front().device));
      CHORUS_CUDA_TRY(cudaStreamWaitEvent(main, m.groups[i].captured, 0));
    }
  }
  return launched;
}

Status CudaWorld::enqueue(const std::vector<CallArgs>& calls, const std::vector<void*>& streams) {
  DeviceGuard guard;
  Impl& m = *impl_;
  if (m.o.focus >= 0) return focusOnly(m.o.focus);
  if (streams.size() != static_cast<size_t>(m.plan.nranks))
    return Status(StatusCode::kInvalidArgument, std::to_string(streams.size()) + " streams for " +
                                                    std::to_string(m.plan.nranks) + " ranks");
  // Every stream in one capture or none: waits between captured and eager
  // work would invalidate the capture.
  std::vector<bool> streamCaptured(streams.size());
  for (size_t r = 0; r < streams.size(); ++r) {
    CHORUS_CUDA_TRY(cudaSetDevice(m.rankDevice[r]));
    Result<bool> cap = capturing(static_cast<cudaStream_t>(streams[r]));
    if (!cap.isOk()) return cap.status();
    streamCaptured[r] = cap.value();
  }
  if (std::find(streamCaptured.begin(), streamCaptured.end(), !streamCaptured.front()) !=
      streamCaptured.end())
    return Status(StatusCode::kInvalidArgument,
                  "some ranks' streams are being captured into a CUDA graph and others are not: "
                  "capture all of a call's streams (forked from one) or none");
  Result<runtime::Geometry> g = m.prepare(calls, streamCaptured.front());
  if (!g.isOk()) return g.status();
  // Each group launches on its first rank's stream after every rank's
  // stream has reached the call; every rank's stream then waits for every
  // group's launch. Each distinct stream once, and no event where the
  // launch is on that very stream: ranks sharing one stream cost nothing.
  std::vector<size_t> distinct;  // the first rank of each distinct stream
  std::vector<bool> inCapture;   // of `distinct`: its stream is capturing
  for (size_t r = 0; r < streams.size(); ++r) {
    bool seen = false;
    for (size_t q : distinct) seen = seen || streams[q] == streams[r];
    if (seen) continue;
    distinct.push_back(r);
    inCapture.push_back(streamCaptured[r]);
  }
  std::vector<cudaStream_t> launchOn;
  for (GpuBlocks& grp : m.groups)
    launchOn.push_back(static_cast<cudaStream_t>(streams[static_cast<size_t>(
        m.plan.blocks[static_cast<size_t>(grp.blockMap.front())].rank)]));
  for (size_t k = 0; k < distinct.size(); ++k) {
    size_t r = distinct[k];
    auto sr = static_cast<cudaStream_t>(streams[r]);
    if (std::all_of(launchOn.begin(), launchOn.end(), [&](cudaStream_t s) { return s == sr; }))
      continue;
    CHORUS_CUDA_TRY(cudaSetDevice(m.rankDevice[r]));
    CHORUS_CUDA_TRY(cudaEventRecord(m.before[r], sr));
    for (size_t i = 0; i < m.groups.size(); ++i) {
      CHORUS_CUDA_TRY(cudaSetDevice(m.groups[i].device));
      if (Status st = waitFor(launchOn[i], m.before[r], sr, inCapture[k]); !st.isOk()) return st;
    }
  }
  if (Status st = m.launch(calls, g.value(), launchOn); !st.isOk()) return st;
  for (size_t r : distinct) {
    CHORUS_CUDA_TRY(cudaSetDevice(m.rankDevice[r]));
    for (const GpuBlocks& grp : m.groups)
      if (Status st = m.join(static_cast<cudaStream_t>(streams[r]), grp); !st.isOk()) return st;
  }
  return Status::ok();
}

Status CudaWorld::asyncError() const {
  Control* ctl = impl_->ctl;
  if (__atomic_load_n(&ctl->abort, __ATOMIC_ACQUIRE) != 0)
    return Status(StatusCode::kAborted, "a call of this communicator was aborted");
  if (__atomic_load_n(&ctl->error, __ATOMIC_ACQUIRE) != kNoError)
    return Status(StatusCode::kTimeout, "a call made no progress for " +
                                            std::to_string(impl_->o.timeoutMs) +
                                            " ms (its blocks stopped)");
  return Status::ok();
}

namespace {

// Connection memory for focus worlds (CudaOptions::focus): device memory on
// one GPU, shared by CUDA IPC handles or, within one process, by address.
// This process, among the processes that exchange handles: random, not
// its pid (processes in separate pid namespaces on one host, containers,
// may share pids).
int64_t processNonce() {
  static const int64_t nonce = [] {
    std::random_device rd;
    return (static_cast<int64_t>(rd()) << 32) ^ static_cast<int64_t>(rd()) ^ ::getpid();
  }();
  return nonce;
}

class DeviceExchange final : public runtime::ConnectionExchange {
 public:
  using AllGather = std::function<Result<std::vector<std::string>>(const std::string&)>;
  DeviceExchange(int device, AllGather allGather, bool ipc)
      : device_(device), allGather_(std::move(allGather)), ipc_(ipc) {}
  ~DeviceExchange() override {
    DeviceGuard guard;
    cudaSetDevice(device_);
    release(current_);
    release(pending_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Result<Region> allocate(size_t bytes) override {
    DeviceGuard guard;
    CHORUS_CUDA_TRY(cudaSetDevice(device_));
    if (stream_ == nullptr)
      CHORUS_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    void* p = nullptr;
    CHORUS_CUDA_TRY(cudaMalloc(&p, bytes));
    pending_.push_back({p, true});
    CHORUS_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, stream_));
    CHORUS_CUDA_TRY(cudaStreamSynchronize(stream_));
    Region r;
    r.data = static_cast<unsigned char*>(p);
    // The address, and with `ipc` this process's nonce and the IPC handle: a
    // peer in the same process (ranks on threads and in processes mixed)
    // cannot open its own process's handle, and uses the address.
    r.handle.assign(reinterpret_cast<const char*>(&p), sizeof p);
    if (ipc_) {
      cudaIpcMemHandle_t h{};
      CHORUS_CUDA_TRY(cudaIpcGetMemHandle(&h, p));
      const int64_t pid = processNonce();
      r.handle.append(reinterpret_cast<const char*>(&pid), sizeof pid);
      r.handle.append(reinterpret_cast<const char*>(&h), sizeof h);
    }
    return r;
  }

  Result<unsigned char*> open(int peer, const std::string& handle, size_t) override {
    DeviceGuard guard;
    CHORUS_CUDA_TRY(cudaSetDevice(device_));
    void* p = nullptr;
    cudaIpcMemHandle_t h{};
    int64_t pid = 0;
    const size_t want = ipc_ ? sizeof p + sizeof pid + sizeof h : sizeof p;
    if (handle.size() != want)
      return Status(
          StatusCode::kInvalidArgument,
          "rank " + std::to_string(peer) + "'s connection handle is " +
              std::to_string(handle.size()) + " bytes, not " + std::to_string(want) +
              (ipc_ ? " (an address, a process nonce and a CUDA IPC handle)" : " (an address)"));
    std::memcpy(&p, handle.data(), sizeof p);
    if (ipc_) {
      std::memcpy(&pid, handle.data() + sizeof p, sizeof pid);
      std::memcpy(&h, handle.data() + sizeof p + sizeof pid, sizeof h);
    }
    if (!ipc_ || pid == processNonce()) return static_cast<unsigned char*>(p);
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess)
      return cudaError(e, "opening rank " + std::to_string(peer) +
                              "'s connection memory (cudaIpcOpenMemHandle)");
    pending_.push_back({p, false});
    return static_cast<unsigned char*>(p);
  }

  // The exchange succeeded and every rank's earlier GPU work is done: the
  // regions of the exchange before are no longer used anywhere.
  void retire() override {
    DeviceGuard guard;
    cudaSetDevice(device_);
    release(current_);
    current_ = std::move(pending_);
    pending_.clear();
  }

  Result<std::vector<std::string>> allGather(const std::string& mine) override {
    return allGather_(mine);
  }

 private:
  struct Held {
    void* p;
    bool owned;  // allocated here (freed), or a peer's mapped here (closed)
  };
  void release(std::vector<Held>& v) {
    for (const Held& h : v) {
      if (h.owned)
        cudaFree(h.p);
      else if (ipc_)
        cudaIpcCloseMemHandle(h.p);
    }
    v.clear();
  }
  int device_;
  AllGather allGather_;
  bool ipc_;
  cudaStream_t stream_ = nullptr;
  std::vector<Held> current_, pending_;
};

}  // namespace

std::shared_ptr<runtime::ConnectionExchange> deviceExchange(
    int device, std::function<Result<std::vector<std::string>>(const std::string&)> allGather,
    bool ipc) {
  return std::make_shared<DeviceExchange>(device, std::move(allGather), ipc);
}

bool isDeviceMemory(const void* p) {
  static const bool kHaveGpu = deviceCount().isOk();
  if (!kHaveGpu || p == nullptr) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice;
}

Status copyBetweenStreams(void* dst, int dstDevice, void* dstStream, const void* src, int srcDevice,
                          void* srcStream, size_t bytes) {
  DeviceGuard guard;
  auto from = static_cast<cudaStream_t>(srcStream);
  auto to = static_cast<cudaStream_t>(dstStream);
  cudaEvent_t sent = nullptr, copied = nullptr;
  struct Events {
    cudaEvent_t* a;
    cudaEvent_t* b;
    ~Events() {
      if (*a != nullptr) cudaEventDestroy(*a);  // released once their work completes
      if (*b != nullptr) cudaEventDestroy(*b);
    }
  } events{&sent, &copied};
  CHORUS_CUDA_TRY(cudaSetDevice(srcDevice));
  CHORUS_CUDA_TRY(cudaEventCreateWithFlags(&sent, cudaEventDisableTiming));
  CHORUS_CUDA_TRY(cudaEventRecord(sent, from));
  CHORUS_CUDA_TRY(cudaSetDevice(dstDevice));
  CHORUS_CUDA_TRY(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  CHORUS_CUDA_TRY(cudaStreamWaitEvent(to, sent, 0));
  if (bytes > 0) CHORUS_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, to));
  CHORUS_CUDA_TRY(cudaEventRecord(copied, to));
  CHORUS_CUDA_TRY(cudaSetDevice(srcDevice));
  CHORUS_CUDA_TRY(cudaStreamWaitEvent(from, copied, 0));
  return Status::ok();
}

Status CudaWorld::waitLaunches() const {
  DeviceGuard guard;
  // This world's last launch on each GPU, not the whole device: other
  // communicators' work there is not ours to wait for.
  for (const GpuBlocks& g : impl_->groups) {
    CHORUS_CUDA_TRY(cudaSetDevice(g.device));
    CHORUS_CUDA_TRY(cudaEventSynchronize(g.done));
  }
  return Status::ok();
}

Status CudaWorld::wait() {
  DeviceGuard guard;
  Impl& m = *impl_;
  if (Status st = waitLaunches(); !st.isOk()) return st;
  // Taken and cleared at once: an abort that comes later is for a later call.
  int error = __atomic_exchange_n(&m.ctl->error, kNoError, __ATOMIC_ACQ_REL);
  int abortFlag = __atomic_exchange_n(&m.ctl->abort, 0, __ATOMIC_ACQ_REL);
  if (error == kNoError && abortFlag == 0) return Status::ok();
  bool aborted = abortFlag != 0;
  std::string msg = aborted
                        ? "the call was aborted"
                        : "the call made no progress for " + std::to_string(m.o.timeoutMs) + " ms";
  for (size_t b = 0; b < m.plan.blocks.size(); ++b) {
    engine::BlockPos p = m.positions[b];
    m.positions[b] = engine::BlockPos{};
    const runtime::PlanBlock& pb = m.plan.blocks[b];
    // (A block that never ran has a zeroed position: step 0.)
    if (!m.runs(pb.rank) || p.finished || p.pc < 0 || p.pc >= pb.nsteps) continue;
    const runtime::PlanStep& s = m.plan.steps[static_cast<size_t>(pb.firstStep + p.pc)];
    msg += "\n  rank " + std::to_string(pb.rank) + " tb " + std::to_string(pb.tb) +
           (m.plan.instances > 1 ? " instance " + std::to_string(pb.instance) : "") + " step " +
           std::to_string(p.pc) + " (" +
           std::string(ir::stepTypeName(static_cast<ir::StepType>(s.type))) + ", iteration " +
           std::to_string(p.iter) + ") did not finish";
  }
  // A stopped call leaves messages in flight: the next call makes the
  // connections afresh. A focus rank cannot: its peers' memory holds their
  // half of the call, so it refuses further calls.
  m.allocated = false;
  Status failed(aborted ? StatusCode::kAborted : StatusCode::kTimeout, msg);
  if (m.o.focus >= 0) m.broken = failed;
  return failed;
}

void CudaWorld::abort() { __atomic_store_n(&impl_->ctl->abort, 1, __ATOMIC_RELEASE); }

int CudaWorld::maxResident() const { return impl_->maxResident; }
int CudaWorld::threadsPerBlock() const { return impl_->threads; }

Result<std::unique_ptr<DeviceBuffers>> DeviceBuffers::make(const std::vector<CallArgs>& hostCalls,
                                                           CollectiveKind coll, int nranks,
                                                           int device,
                                                           const std::vector<int>& rankDevices) {
  std::unique_ptr<DeviceBuffers> d(new DeviceBuffers());
  d->device_ = hostCalls;
  for (size_t r = 0; r < hostCalls.size(); ++r) {
    const CallArgs& c = hostCalls[r];
    int dev = rankDevices.empty() ? device : rankDevices[r];
    auto [inElems, outElems] = runtime::bufferElems(coll, nranks, c.count);
    size_t esz = dataTypeSize(c.type);
    auto* send = const_cast<unsigned char*>(static_cast<const unsigned char*>(c.sendbuff));
    auto* recv = static_cast<unsigned char*>(c.recvbuff);
    Region rs{send, nullptr, inElems * esz}, rr{recv, nullptr, outElems * esz};
    std::vector<Region> mine;
    if (send == nullptr || rs.bytes == 0) {
      mine = {rr};
    } else if (recv == nullptr || rr.bytes == 0) {
      mine = {rs};
    } else if (send < recv + rr.bytes && recv < send + rs.bytes) {
      unsigned char* lo = std::min(send, recv);
      unsigned char* hi = std::max(send + rs.bytes, recv + rr.bytes);
      mine = {Region{lo, nullptr, static_cast<size_t>(hi - lo)}};
    } else {
      mine = {rs, rr};
    }
    for (Region& g : mine) {
      if (g.host == nullptr) continue;
      Result<void*> p = deviceAlloc(g.bytes, dev);
      if (!p.isOk()) return p.status();
      g.dev = static_cast<unsigned char*>(p.value());
      d->regions_.push_back(g);
      auto map = [&](const void* h) -> unsigned char* {
        auto* u = static_cast<const unsigned char*>(h);
        return u >= g.host && u < g.host + g.bytes ? g.dev + (u - g.host) : nullptr;
      };
      if (unsigned char* m = map(c.sendbuff)) d->device_[r].sendbuff = m;
      if (unsigned char* m = map(c.recvbuff)) d->device_[r].recvbuff = m;
    }
  }
  return Result<std::unique_ptr<DeviceBuffers>>(std::move(d));
}

DeviceBuffers::~DeviceBuffers() {
  for (Region& g : regions_) deviceFree(g.dev);
}

Status DeviceBuffers::upload() {
  for (const Region& g : regions_)
    if (Status st = copyToDevice(g.dev, g.host, g.bytes); !st.isOk()) return st;
  return Status::ok();
}

Status DeviceBuffers::download() {
  for (const Region& g : regions_)
    if (Status st = copyToHost(g.host, g.dev, g.bytes); !st.isOk()) return st;
  return Status::ok();
}

Result<void*> deviceAlloc(size_t bytes, int device) {
  CHORUS_CUDA_TRY(cudaSetDevice(device));
  void* p = nullptr;
  CHORUS_CUDA_TRY(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
  return p;
}

void deviceFree(void* p) {
  if (p != nullptr) cudaFree(p);
}

Result<void*> deviceZeroed(size_t bytes, int device) {
  DeviceGuard guard;  // the caller's current device stays
  CHORUS_CUDA_TRY(cudaSetDevice(device));
  void* p = nullptr;
  CHORUS_CUDA_TRY(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
  if (cudaError_t e = cudaMemset(p, 0, bytes); e != cudaSuccess) {
    cudaFree(p);
    return cudaError(e, "zeroing a buffer");
  }
  return p;
}

Status copyToDevice(void* dst, const void* src, size_t bytes) {
  CHORUS_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  return Status::ok();
}

Status copyToHost(void* dst, const void* src, size_t bytes) {
  CHORUS_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  return Status::ok();
}

Result<double> copyBandwidth(int device, size_t bytes, int reps) {
  CHORUS_CUDA_TRY(cudaSetDevice(device));
  void *a = nullptr, *b = nullptr;
  CHORUS_CUDA_TRY(cudaMalloc(&a, bytes));
  cudaError_t e = cudaMalloc(&b, bytes);
  if (e != cudaSuccess) {
    cudaFree(a);
    return cudaError(e, "cudaMalloc");
  }
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  float best = 0;
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);  // warm up
  for (int i = 0; i < reps && e == cudaSuccess; ++i) {
    cudaEventRecord(t0);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(t1);
    e = cudaEventSynchronize(t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    if (best == 0 || ms < best) best = ms;
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaFree(a);
  cudaFree(b);
  if (e != cudaSuccess) return cudaError(e, "device copy");
  return 2.0 * static_cast<double>(bytes) / (static_cast<double>(best) * 1e-3);
}

}  // namespace chorus::cuda
