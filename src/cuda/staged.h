// GPU ranks whose peers are in other processes, served through host memory
// (as Gloo serves CUDA tensors). Each call, on the rank's stream:
//
//   device -> pinned host copies of its inputs
//   a host function marking the call ready            (returns at once)
//   a one-thread kernel waiting for the call's "done" word (mapped memory)
//   pinned host -> device copies of its outputs
//
// and, off the stream, the rank's worker thread runs the calls in the order
// their streams reach them (the host function queues them), on the host
// runtime (a process world: shared memory, TCP), then sets each one's
// "done" word. So a call is enqueued and returns as NCCL's does; no call
// waits behind one its own stream has not reached; ranks of one process
// (several GPUs, or several ranks on one GPU) and communicators of one
// process never wait on each other's host functions; and a CUDA graph may
// capture a call (each replay queues it again). Calls of one communicator
// on different streams must be ordered by the caller (one stream, or
// events): every process must run them in the same order. The CUDA executor, which needs every rank
// of a world in one process, is the fast path; this one is bounded by host memory bandwidth.
//
// No CUDA headers: streams are void* (cudaStream_t). Nothing throws.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "core/status.h"
#include "runtime/device_backend.h"

namespace chorus::cuda {

using runtime::StagedRegion;

// The CUDA backend's StagedQueue (runtime/device_backend.h).
class StagedRank final : public runtime::StagedQueue {
 public:
  StagedRank(int device, int timeoutMs);
  // Returns at once: calls not run yet are let through without running
  // (their outputs are left as they were; chorusCommDestroy synchronizes
  // first) and the worker ends when the last enqueued call has passed
  // through its stream. A graph that captured a call must not be replayed,
  // nor be running, after this.
  ~StagedRank() override;
  StagedRank(const StagedRank&) = delete;
  StagedRank& operator=(const StagedRank&) = delete;

  int device() const override { return device_; }
  // Enqueues one call: `regions` staged, `run` called on the worker with
  // each region's host address (in order), outputs copied back. `streams`
  // are the streams of the call's parts (a group may span several): the
  // first carries the staging, the others are joined to it before and after.
  // Errors (nothing enqueued): an earlier call's failure (the communicator
  // is broken), kUnsupported naming the CUDA call that failed.
  Status enqueue(const std::vector<void*>& streams, std::vector<StagedRegion> regions,
                 std::function<Status(const std::vector<void*>&)> run) override;
  // Runs `work` on the worker once every call enqueued before it has run,
  // and waits for it: how communicator-level exchanges (split, shrink) stay
  // in order with the calls. kTimeout when those calls' streams do not reach
  // them in time.
  Status runInOrder(std::function<Status()> work) override;
  // The first failure of a run; ok while none.
  Status asyncError() const override;
  // Waits until every call enqueued so far (not captured) has passed
  // through its stream, or the timeout.
  Status synchronize() override;

  struct State;  // shared with the host functions and the worker (staged.cu)

 private:
  const int device_;
  std::shared_ptr<State> state_;
};

}  // namespace chorus::cuda
