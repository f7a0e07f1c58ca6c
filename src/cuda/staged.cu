#include <cuda_runtime.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "cuda/staged.h"

namespace chorus::cuda {
namespace {

Status cudaFailure(cudaError_t e, const char* what) {
  return Status(StatusCode::kUnsupported, std::string(what) + ": " + cudaGetErrorName(e) + " (" +
                                              cudaGetErrorString(e) + ")");
}

#define CHORUS_STAGED_TRY(expr)                                         \
  do {                                                                  \
    cudaError_t chorus_e_ = (expr);                                     \
    if (chorus_e_ != cudaSuccess) return cudaFailure(chorus_e_, #expr); \
  } while (0)

bool onDevice(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

}  // namespace

struct StagedRank::Job {
  StagedRank* rank = nullptr;
  std::vector<StagedRegion> regions;
  std::vector<void*> host;                 // per region: where the run sees it
  std::vector<StagedRank::Pinned> pinned;  // the pinned buffers it holds
  std::function<Status(const std::vector<void*>&)> run;
  bool capturedJob = false;
};

namespace {

void CUDART_CB runJob(void* p) {
  auto* job = static_cast<StagedRank::Job*>(p);
  Status st = job->run(job->host);
  if (!st.isOk()) job->rank->asyncFailure(st);
}

void CUDART_CB endJob(void* p) {
  auto* job = static_cast<StagedRank::Job*>(p);
  StagedRank* rank = job->rank;
  rank->recycle(std::move(job->pinned));
  delete job;
  rank->outstanding_.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace

StagedRank::StagedRank(int device, int timeoutMs) : device_(device), timeoutMs_(timeoutMs) {}

StagedRank::~StagedRank() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs_);
  while (outstanding_.load(std::memory_order_acquire) > 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (outstanding_.load(std::memory_order_acquire) > 0) return;  // still in use: leak, not crash
  for (const Pinned& b : pool_) cudaFreeHost(b.p);
  for (const auto& job : captured_)
    for (const Pinned& b : job->pinned) cudaFreeHost(b.p);
}

void StagedRank::recycle(std::vector<Pinned> buffers) {
  std::lock_guard<std::mutex> lock(mu_);
  pool_.insert(pool_.end(), buffers.begin(), buffers.end());
}

Result<void*> StagedRank::take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto best = pool_.end();
    for (auto it = pool_.begin(); it != pool_.end(); ++it)
      if (it->bytes >= bytes && (best == pool_.end() || it->bytes < best->bytes)) best = it;
    if (best != pool_.end()) {
      void* p = best->p;
      pool_.erase(best);
      return p;
    }
  }
  void* p = nullptr;
  CHORUS_STAGED_TRY(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
  return p;
}

void StagedRank::asyncFailure(Status st) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.isOk()) std::swap(error_, st);  // (nvcc: no discarded Status&)
}

Status StagedRank::asyncError() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status StagedRank::synchronize() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs_);
  while (outstanding_.load(std::memory_order_acquire) > 0) {
    if (std::chrono::steady_clock::now() >= deadline)
      return Status(StatusCode::kTimeout, "staged GPU calls did not finish within " +
                                              std::to_string(timeoutMs_ / 1000) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return asyncError();
}

Status StagedRank::enqueue(void* stream, std::vector<StagedRegion> regions,
                           std::function<Status(const std::vector<void*>&)> run) {
  int saved = 0;
  CHORUS_STAGED_TRY(cudaGetDevice(&saved));
  struct Restore {
    int d;
    ~Restore() { cudaSetDevice(d); }
  } restore{saved};
  CHORUS_STAGED_TRY(cudaSetDevice(device_));
  auto s = static_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CHORUS_STAGED_TRY(cudaStreamIsCapturing(s, &capture));

  auto job = std::make_unique<Job>();
  job->rank = this;
  job->run = std::move(run);
  job->capturedJob = capture != cudaStreamCaptureStatusNone;
  for (const StagedRegion& r : regions) {
    if (r.data == nullptr || r.bytes == 0 || !onDevice(r.data)) {
      job->host.push_back(r.data);  // host memory, or nothing: used in place
      continue;
    }
    // Sizes round up to a power of two so that later calls reuse buffers.
    size_t bytes = 4096;
    while (bytes < r.bytes) bytes *= 2;
    Result<void*> got = take(bytes);
    if (!got.isOk()) {
      recycle(std::move(job->pinned));
      return got.status();
    }
    void* p = got.value();
    job->pinned.push_back({p, bytes});
    job->host.push_back(p);
    if (r.in) {
      if (cudaError_t e = cudaMemcpyAsync(p, r.data, r.bytes, cudaMemcpyDeviceToHost, s);
          e != cudaSuccess) {
        recycle(std::move(job->pinned));
        return cudaFailure(e, "cudaMemcpyAsync (device to host)");
      }
    }
  }
  job->regions = std::move(regions);
  CHORUS_STAGED_TRY(cudaLaunchHostFunc(s, runJob, job.get()));
  for (size_t i = 0; i < job->regions.size(); ++i) {
    const StagedRegion& r = job->regions[i];
    if (r.out && job->host[i] != r.data)
      CHORUS_STAGED_TRY(cudaMemcpyAsync(r.data, job->host[i], r.bytes, cudaMemcpyHostToDevice, s));
  }
  if (job->capturedJob) {
    std::lock_guard<std::mutex> lock(mu_);
    captured_.push_back(std::move(job));
    return Status::ok();
  }
  outstanding_.fetch_add(1, std::memory_order_acq_rel);
  if (cudaError_t e = cudaLaunchHostFunc(s, endJob, job.get()); e != cudaSuccess) {
    outstanding_.fetch_sub(1, std::memory_order_acq_rel);
    // The run is enqueued and will read the job: keep it for the rank's life.
    std::lock_guard<std::mutex> lock(mu_);
    captured_.push_back(std::move(job));
    return cudaFailure(e, "cudaLaunchHostFunc");
  }
  job.release();  // endJob frees it
  return Status::ok();
}

}  // namespace chorus::cuda
