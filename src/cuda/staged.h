// GPU ranks whose peers are in other processes, served through host memory
// (as Gloo serves CUDA tensors): on the rank's stream, the call's device
// inputs are copied to pinned host memory, a host function runs the rank's
// part on the host runtime (a process world: shared memory, TCP), and the
// outputs are copied back. The call is enqueued and returns, ordered on its
// stream like an NCCL call; a CUDA graph may capture it (the capture keeps
// its host memory for the rank's life). The CUDA executor, which needs every
// rank of a world in one process, is the fast path; this one is the general
// one, bounded by host memory bandwidth.
//
// The host functions of one process run one at a time (CUDA's callback
// thread), so the calls of the communicators one process holds must be made
// in the same order by every process, as NCCL asks too.
//
// No CUDA headers: streams are void* (cudaStream_t). Nothing throws.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/status.h"

namespace chorus::cuda {

// One buffer of a call. Device memory is staged: copied to the host before
// the run if `in`, back after it if `out`. Host memory (a buffer the API
// made itself) is used where it is.
struct StagedRegion {
  void* data = nullptr;
  size_t bytes = 0;
  bool in = false;
  bool out = false;
};

class StagedRank {
 public:
  StagedRank(int device, int timeoutMs);
  ~StagedRank();  // waits (up to the timeout) for its enqueued calls
  StagedRank(const StagedRank&) = delete;
  StagedRank& operator=(const StagedRank&) = delete;

  int device() const { return device_; }
  // Enqueues one call on `stream`: the regions' staging, then `run` with
  // each region's host address (in order), then the copies back. A failure
  // of `run` is kept for asyncError(); the stream goes on. Errors here
  // (nothing enqueued): kUnsupported naming the CUDA call that failed.
  Status enqueue(void* stream, std::vector<StagedRegion> regions,
                 std::function<Status(const std::vector<void*>&)> run);
  // The first failure of a run; ok while none.
  Status asyncError() const;
  // Waits until every call enqueued (and not captured) has run.
  Status synchronize();

  // For the host functions (staged.cu): a run's failure, and the count of
  // enqueued calls that have not ended.
  struct Job;
  struct Pinned {
    void* p;
    size_t bytes;
  };
  void asyncFailure(Status st);
  void recycle(std::vector<Pinned> buffers);  // no CUDA call: host functions make none
  std::atomic<int> outstanding_{0};

 private:
  const int device_;
  const int timeoutMs_;
  mutable std::mutex mu_;
  Status error_;
  std::vector<Pinned> pool_;                    // pinned buffers free for the next calls
  std::vector<std::unique_ptr<Job>> captured_;  // held for the graphs that replay them
  Result<void*> take(size_t bytes);
};

}  // namespace chorus::cuda
