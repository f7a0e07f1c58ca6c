// A world: the ranks of one communicator living in this process (threads),
// and the machinery that turns per-rank calls into runs of verified
// algorithms: a rendezvous per collective (the k-th collective of every rank
// forms one call, checked for agreement), algorithm selection (files, then
// built-ins by size), a cache of prepared calls and fabrics so a repeated
// call allocates nothing, point-to-point matching, groups, timeouts, abort.
//
// Each rank's part runs on the thread that called for it; a group that
// holds several ranks' calls hands them to per-rank helper threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "runtime/device_backend.h"
#include "runtime/exec/driver.h"
#include "runtime/plan/planner.h"
#include "runtime/plan/selection.h"

namespace chorus::api {

struct Op {
  enum class Kind { kCollective, kSend, kRecv };
  Kind kind = Kind::kCollective;
  CollectiveKind collective = CollectiveKind::kAllReduce;
  runtime::CallArgs args;  // send/recv: sendbuff or recvbuff, count, type
  int root = -1;           // rooted collectives
  int peer = -1;           // send/recv
  std::shared_ptr<const runtime::VerifiedAlgorithm> algo;  // explicit algorithm, or null
  void* stream = nullptr;      // GPU worlds: the rank's cudaStream_t (nullptr: the default stream)
  std::shared_ptr<void> keep;  // storage the call's buffers point into, if the API made any

  std::string describe() const;  // "allreduce(count 1024, fp32, sum)"
};

// A communicator's settings. fromEnvironment() is the one place the API
// layer reads the environment (below it: CHORUS_ALGO_DIR & co. in
// runtime/selection, CHORUS_DEBUG in core/log, the bootstrap's variables in
// runtime/bootstrap).
struct WorldOptions {
  int timeoutMs = 300000;  // CHORUS_TIMEOUT_S: a rank waiting this long without progress fails
  size_t sliceBytes = 0;   // CHORUS_SLICE_BYTES; 0 = the algorithm's
  int slots = 8;           // messages in flight per connection
  // Processes: how to reach peers, CHORUS_TRANSPORT (auto, shm, tcp; as
  // given, checked when the communicator is made).
  std::string transport = "auto";
  std::string jobId;              // CHORUS_JOB_ID: names shared-memory segments (chorus launch)
  bool crossMemoryAttach = true;  // CHORUS_CMA (0: off)
  std::string tcpSockets;         // CHORUS_TCP_SOCKETS per peer, as given ("": the default)
  // CHORUS_SPIN_US: how long a blocked rank busy-polls before it yields
  // (runtime::WaitPolicy); -1: 50 us where this host's ranks fit its cores,
  // else 0.
  int spinUs = -1;
  // CHORUS_RING_MB_PER_PEER: processes keep the rings of the algorithms
  // they used within this many MiB per peer (the rings of the least
  // recently used algorithms are released first, on every rank at the same
  // call; an algorithm's own rings are kept whatever their size).
  size_t ringBytesPerPeer = size_t{32} << 20;
  // CHORUS_PROVE_RANKS: processes run their rank's part of a built-in; up
  // to this many ranks each verifies the whole algorithm first, beyond it
  // the part rests on the family's proof (runtime/plan/planner.h, docs/scale.md).
  int proveRanks = runtime::kProveRanks;
  // GPU worlds (chorusCommInitAll with a devlist): rank r on GPU devices[r],
  // device buffers, calls enqueued on the ranks' streams (docs/cuda.md).
  // Empty: host ranks, host buffers.
  std::vector<int> devices;
  // CHORUS_INSTANCES: GPU worlds' blocks per IR threadblock, each with its
  // share of every slice (runtime::DeviceOptions::instances); 0: the
  // backend's choice.
  int instances = 0;
  // CHORUS_GPU_LL_BYTES: GPU worlds run built-ins on LL's slots for calls of
  // at most this many bytes (runtime::PlanPart::protocol; 0: never).
  size_t gpuLLBytes = runtime::SelectionRequest{}.gpuLLBytes;
  // CHORUS_GPU_IPC: GPU ranks in processes of one host run their
  // collectives with their own kernels on connections shared by CUDA IPC
  // (0: every call staged through host memory, as across hosts).
  bool gpuIpc = true;
  static WorldOptions fromEnvironment();
};

class InProcessWorld;

// What a GPU world's device executors are made with: its devices, slices,
// slots and CHORUS_TIMEOUT_S (issue 39, B3: the timeout was left out).
runtime::DeviceOptions deviceOptions(const WorldOptions& o);

// The global candidates for automatic selection: the environment's files
// (loaded once, on first use) and files registered through the API.
runtime::AlgorithmRegistry& globalRegistry();

// One posted operation of one rank; InProcessWorld::complete() finishes it.
struct Ticket;
// The k-th collective of every rank.
struct Assembly;

class InProcessWorld : public std::enable_shared_from_this<InProcessWorld> {
 public:
  InProcessWorld(int nranks, WorldOptions options);
  ~InProcessWorld();
  InProcessWorld(const InProcessWorld&) = delete;
  InProcessWorld& operator=(const InProcessWorld&) = delete;

  int size() const { return n_; }
  bool onGpu() const { return !options_.devices.empty(); }
  const WorldOptions& options() const { return options_; }
  // GPU worlds: waits for every call enqueued so far (its failure, if one
  // stalled or was aborted). Host worlds: ok (their calls are done when they
  // return).
  Status synchronize();

  // Posts rank `rank`'s next operation without waiting.
  std::shared_ptr<Ticket> post(int rank, Op op);
  // Runs (collectives) or waits for (send/recv) a posted operation on the
  // calling thread.
  Status complete(const std::shared_ptr<Ticket>& t);
  // Runs complete(t) on the rank's helper thread and calls `done` there
  // with the result.
  void dispatch(const std::shared_ptr<Ticket>& t, std::function<void(Status)> done);

  // Ends the world: every pending and later call returns `why`.
  void abort(Status why);
  // The error that ended the world, or ok.
  Status asyncError() const;

 private:
  struct CacheKey {
    const runtime::VerifiedAlgorithm* va;
    size_t count;
    DataType type;
    ReduceOp op;
    std::vector<std::pair<const void*, void*>> buffers;
    bool operator<(const CacheKey& o) const;
  };
  struct CacheEntry {
    std::shared_ptr<const runtime::VerifiedAlgorithm> va;  // keeps the key's pointer alive
    std::shared_ptr<runtime::PreparedCall> call;
    uint64_t lastUse = 0;
  };
  struct Helper;

  void resolve(Assembly& a);  // mu_ held
  Status plan(Assembly& a, std::vector<std::string>* why);
  Result<std::shared_ptr<runtime::PreparedCall>> prepared(
      const std::shared_ptr<const runtime::VerifiedAlgorithm>& va,
      const std::vector<runtime::CallArgs>& calls);
  Status runCollective(Ticket& t);
  // GPU worlds: enqueues every part of a resolved collective on the ranks'
  // streams (mu_ held).
  Status enqueueOnGpu(const std::vector<runtime::PlanPart>& parts,
                      const std::vector<runtime::CallArgs>& calls,
                      const std::vector<void*>& streams);
  Status waitP2p(Ticket& t);
  void matchP2p(Ticket& send, Ticket& recv);  // p2pMu_ held

  const int n_;
  const WorldOptions options_;
  const runtime::WaitPolicy wait_;  // how a blocked rank waits (from the rank count)
  std::atomic<bool> aborted_{false};

  mutable std::mutex mu_;  // assemblies, caches
  std::condition_variable cv_;
  mutable std::mutex errorMu_;  // error_ alone (taken under mu_ or alone, never the other way)
  Status error_;
  std::vector<uint64_t> nextSeq_;
  std::map<uint64_t, std::shared_ptr<Assembly>> assemblies_;
  runtime::BuiltinCache builtins_;
  std::map<const runtime::VerifiedAlgorithm*, std::shared_ptr<runtime::LocalFabric>> fabrics_;
  std::map<CacheKey, CacheEntry> calls_;
  uint64_t useClock_ = 0;
  size_t cachedBytes_ = 0;  // scratch of the cached calls (call_cache.h)

  // GPU worlds: one device executor per algorithm (runtime/device_backend.h).
  struct Gpu;
  std::unique_ptr<Gpu> gpu_;

  std::mutex p2pMu_;
  std::condition_variable p2pCv_;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Ticket>>> sends_, recvs_;

  std::mutex helpersMu_;
  std::vector<std::unique_ptr<Helper>> helpers_;
};

}  // namespace chorus::api
