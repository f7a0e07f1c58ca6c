// A communicator whose ranks are processes (one rank here, the others in
// other processes of this host or of others): they meet through the TCP
// bootstrap, talk through fabrics (shared memory with ranks on this host,
// TCP with the others; CHORUS_TRANSPORT=tcp forces TCP) created
// collectively on the first use of each algorithm, and each runs its own rank's executor on the
// calling thread (issue 4). Every rank must make the same calls in the same order, as with NCCL; a
// rank that stops answering makes the others time out.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/world.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/exec/driver.h"
#include "runtime/plan/planner.h"
#include "runtime/transport/network.h"
#include "runtime/transport/process_fabric.h"

namespace chorus::api {

class ProcessWorld {
 public:
  // Collective over the ranks of `config` (bootstrap, doorbells).
  static Result<std::shared_ptr<ProcessWorld>> create(const runtime::BootstrapConfig& config,
                                                      WorldOptions options);
  // The same over a bootstrap that is connected already.
  static Result<std::shared_ptr<ProcessWorld>> create(std::unique_ptr<runtime::Bootstrap> boot,
                                                      WorldOptions options);
  ~ProcessWorld();
  int size() const { return n_; }
  int rank() const { return me_; }
  const WorldOptions& options() const { return options_; }
  // This rank's part of the next collective.
  Status collective(const Op& op);
  // The parts the next collective runs as (its seq counted): on the host,
  // or with `gpu` as a GPU world plans them (LL up to `gpuLLBytes`). The
  // world keeps them until the next call: a loop's calls copy nothing.
  Result<const std::vector<runtime::PlanPart>*> planCollective(const Op& op, bool gpu,
                                                               size_t gpuLLBytes);
  // Every rank's blob by rank, over the bootstrap (a collective; one
  // caller at a time).
  Result<std::vector<std::string>> allGather(const std::string& mine);
  // Every rank lives on this host (shares its memory and its GPUs).
  bool allOnOneHost() const;
  // The communicator's name for what it shares (rank 0's choice).
  const std::string& prefix() const { return prefix_; }
  // Called whenever the communicator is aborted (a peer died, a call
  // failed, chorusCommAbort), from any thread; an empty one removes it (and
  // waits for a call in progress).
  void setAbortHook(std::function<void()> hook);
  // A call that ended with `st`: aborts the communicator and returns what to
  // report (a peer's failure that ended it, or its own); peers hear of it.
  Status failed(Status st);
  // This rank's sends and receives of one group, moved together (a pair
  // exchanging both ways does not wait on itself). Sends to and receives
  // from this rank itself pair up in order.
  Status pointToPoint(const std::vector<const Op*>& ops);
  // How this rank runs its part of a call.
  runtime::RankRunOptions runOptions();
  Status barrier();
  void abort(Status why);
  Status asyncError() const;

 private:
  ProcessWorld(int n, int me, WorldOptions o)
      : n_(n), me_(me), options_(o), builtins_(n, me, o.proveRanks) {}
  // What other ranks reported, besides `first`, within half a second: for
  // the message of a timeout (whom the rank we waited for waited for).
  std::string heardMeanwhile(const Status& first);
  Result<runtime::RankCall*> rankCall(const std::shared_ptr<const runtime::VerifiedAlgorithm>& va,
                                      const runtime::CallArgs& args);

  struct Key {
    const runtime::VerifiedAlgorithm* va;
    size_t count;
    DataType type;
    ReduceOp op;
    const void* send;
    void* recv;
    bool operator<(const Key& o) const;
  };
  struct Entry {
    std::shared_ptr<const runtime::VerifiedAlgorithm> va;
    std::unique_ptr<runtime::RankCall> call;
    uint64_t lastUse = 0;
    const runtime::ProcessFabric* fabric = nullptr;  // the one it was made on
  };

  const int n_, me_;
  const WorldOptions options_;
  std::unique_ptr<runtime::Bootstrap> boot_;
  std::string prefix_;
  runtime::BuiltinCache builtins_;
  runtime::WaitPolicy wait_;  // spin only if this host's ranks fit its cores
  bool sharedMemory_ = true;  // no pair talks anything but shared memory (selection)
  // How each peer is reached (doorbells, TCP links); outlives the fabrics.
  std::unique_ptr<runtime::Network> net_;
  std::atomic<runtime::Network*> netAwake_{nullptr};  // net_, for abort() from other threads
  // An algorithm's rings: the fabric its latest calls run on, remade with
  // larger slots when a call wants them (up to `most`, fixed at the first),
  // released when the algorithms used since need the room (releaseRings).
  struct FabricSlot {
    std::shared_ptr<runtime::ProcessFabric> fabric;  // null: released (or not made yet)
    size_t most = 0;                                 // the largest slice its rings may have
    size_t inbound = 0;  // the most slots any rank receives into (all ranks agree)
    uint64_t lastUse = 0;
    // What the pool counts for its rings: every rank's alike (so that all
    // release the same ones at the same call), twice the most any rank
    // receives into (a rank also maps the rings it sends into).
    size_t bytes(size_t unit) const { return 2 * inbound * unit; }
  };
  std::map<const runtime::VerifiedAlgorithm*, FabricSlot> fabrics_;
  uint64_t fabricClock_ = 0;  // counts rankCall()s: the same sequence on every rank
  // Makes room for `need` more bytes of rings within the pool's budget
  // (WorldOptions::ringBytesPerPeer x peers), releasing the least recently
  // used algorithms' rings, and the calls made on them (the caller's own
  // algorithm holds none then: its rings are being made).
  void releaseRings(size_t need);
  // The pool's budget: WorldOptions::ringBytesPerPeer x peers.
  size_t ringPoolBytes() const;
  // Drops the cached calls made on `fabric`.
  void dropCalls(const runtime::ProcessFabric* fabric);
  uint32_t nextFabric_ = 0;                      // the next fabric's id (its shared memory's name)
  std::shared_ptr<runtime::ProcessFabric> p2p_;  // every ordered pair, for send/recv
  std::map<Key, Entry> calls_;
  // The last collective's plan, for the next call that is the same.
  struct LastPlan {
    runtime::SelectionRequest req;
    const runtime::VerifiedAlgorithm* algo = nullptr;  // the explicit one, if any
    size_t candidates = 0;                             // globalRegistry().size() then
    std::vector<runtime::PlanPart> parts;
  };
  std::optional<LastPlan> last_;
  uint64_t useClock_ = 0, seq_ = 0;
  size_t cachedBytes_ = 0;  // scratch of the cached calls (call_cache.h)
  std::atomic<bool> aborted_{false};
  std::mutex bootMu_;  // boot_'s collectives
  std::mutex hookMu_;
  std::function<void()> abortHook_;  // guarded by hookMu_
  mutable std::mutex mu_;            // error_
  Status error_;
  // Failures other ranks reported after error_ was set (a few, for the
  // message of a timeout: whom the rank we waited for was waiting for).
  std::vector<std::string> reports_;  // guarded by mu_
};

}  // namespace chorus::api
