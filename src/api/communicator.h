// One rank of a communicator, however its ranks are placed: a thread of an
// in-process world (CPU or GPU ranks: InProcessWorld), a process of a
// multi-process job (ProcessWorld over the runtime's Network), or such a
// process rank on a GPU whose calls are staged through host memory
// (runtime::StagedQueue). The C API (capi.cc) keeps handles, groups and
// entry points and asks only this interface; how ranks meet, run a group,
// split and shrink is each kind's (communicator.cc).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/process_world.h"
#include "api/world.h"
#include "core/status.h"

namespace chorus::api {

// One communicator's part of a group, started; wait() ends it and says how.
class Started {
 public:
  virtual ~Started() = default;
  virtual Status wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Its ranks are on GPUs (streams allowed; device memory expected).
  virtual bool onGpu() const = 0;
  // chorusCommCuDevice: the rank's GPU, or -1 on the host.
  virtual int device() const = 0;
  // Rooted calls on a non-root rank, for the buffer only the root uses:
  // whether a given one is replaced by storage of the call's own anyway
  // (staged ranks never stage a buffer nobody reads).
  virtual bool replacesRootOnlyBuffer() const { return false; }
  // Storage of the communicator's own for a root-only buffer left NULL, of
  // at least `bytes` (kept by it, valid for the calls that use it; GPU
  // process ranks' kernels need device memory); kUnsupported: the API makes
  // host storage for the call.
  virtual Result<void*> rootOnlyStorage(size_t bytes) {
    (void)bytes;
    return Status(StatusCode::kUnsupported, "host storage");
  }
  virtual Status asyncError() const = 0;
  // Ends the running call and every later one (any thread).
  virtual void abort(Status why) = 0;
  // chorusCommFinalize: the calls so far have finished; their outcome.
  virtual Status finalize() = 0;
  // chorusCommDestroy: enqueued calls finish first (within the timeout).
  virtual void flush() {}
  // This rank's ops of one group, in order, started. `alone`: no other
  // communicator takes part in this thread's group, so the work may run on
  // this thread in wait(); otherwise it must not wait for the others' to
  // start (they start after it, on this thread).
  virtual std::unique_ptr<Started> start(std::vector<Op> ops, bool alone) = 0;
  // One op outside a group, run to its end on this thread: start({op},
  // true) and wait, which kinds with a shorter path replace (a process
  // rank's small calls: no vector, thread or closure per call).
  virtual Status runAlone(Op op);
  // chorusCommSplit: this rank's new communicator; null for no color.
  virtual Result<std::shared_ptr<Communicator>> split(int color, int key) = 0;
  // chorusCommShrink: the survivors' new communicator (`survivors` in rank
  // order, this rank among them).
  virtual Result<std::shared_ptr<Communicator>> shrink(const std::vector<int>& survivors,
                                                       bool abortFirst) = 0;
};

// One thread's group: every communicator's ops started, in the order the
// communicators first appear, then each waited for; the first failure.
Status runGroup(std::vector<std::pair<std::shared_ptr<Communicator>, Op>> ops);

// Rank `rank` of every rank of `world` (chorusCommInitAll).
std::shared_ptr<Communicator> threadRank(std::shared_ptr<InProcessWorld> world, int rank);
// A process rank (chorusCommInitProcess); `device` >= 0: on that GPU, its
// calls staged through host memory.
Result<std::shared_ptr<Communicator>> processRank(Result<std::shared_ptr<ProcessWorld>> world,
                                                  int device = -1);
// chorusCommInitRank(Device): meets the other ranks at the unique id's root;
// ranks all in this process make one in-process world (on GPUs if they pass
// devices), else each is a process rank. `device` -1: on the host.
Result<std::shared_ptr<Communicator>> joinRank(int nranks, const std::string& id, int rank,
                                               int device);

// One INFO line when ranks of a GPU world share a GPU (NCCL refuses that;
// here they are one world on the device).
void logSharedGpus(const std::vector<int>& devices);

// An Op of collective `k` (the type and op are the caller's to set).
Op collectiveOp(CollectiveKind k, const void* send, void* recv, size_t count);

}  // namespace chorus::api
