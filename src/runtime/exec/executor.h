// The executor: interprets one rank's part of a verified algorithm with the
// exact semantics of docs/spec/IR.md: chunk geometry (section 3), slice iterations,
// dependencies within an iteration (section 4), every instruction
// (section 2), in-place and out-of-place calls, scratch buffers.
//
// It is a steppable state machine: advance() runs every threadblock of the
// rank as far as it can without blocking and reports whether anything moved.
// Drivers decide who advances when: the deterministic driver (driver.h) runs
// all ranks in one thread in a seeded order; a threaded driver will run the
// same executors on worker threads.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/collectives.h"
#include "core/status.h"
#include "core/types.h"
#include "ir/ir.h"
#include "ir/slicing.h"
#include "runtime/transport/shared_buffers.h"
#include "runtime/transport/transport.h"
#include "verify/graph.h"
#include "verify/verifier.h"

namespace chorus::runtime {

// Which of one rank's sends may travel by reference (RankExecutor), per
// threadblock and step, for one call form. A message sent by reference is
// read from the sender's memory after the send, so nothing may write that
// memory until the receiver has consumed it.
enum RefKind : uint8_t {
  kRefNever = 0,
  // Nothing on the rank writes the message's memory after the step during
  // the call until the receiver has consumed it.
  kRefStable = 1,
  // And it is a plain send's message to a receiver that copies it.
  kRefToCopier = 2,
};
struct RefPlan {
  std::vector<std::vector<uint8_t>> kinds;  // [tb][step]: a RefKind
};

// An algorithm the runtime may run: proven by the verifier, or one rank's
// part of a family member that the family's proof covers (fromFamily). The
// runtime runs nothing else.
//
// A whole algorithm holds every rank's steps; a part (docs/scale.md) holds
// one rank's threadblocks (the other ranks keep their ids and chunk counts)
// and that rank's by-reference plans, which need the cross-rank
// happens-before graph the part no longer has.
class VerifiedAlgorithm {
 public:
  // kInvalidArgument quoting the verifier's first error if it is rejected.
  static Result<std::shared_ptr<const VerifiedAlgorithm>> make(ir::Algorithm algo);
  // Rank `rank`'s part of this whole algorithm, proven with it: its
  // threadblocks and its by-reference plans from the whole graph.
  std::shared_ptr<const VerifiedAlgorithm> part(int rank) const;
  // Rank `rank`'s part built alone (e.g. algorithms::makeClassic with a focus),
  // never seen whole: `basis` says what proves the family it belongs to.
  // Its sends go by reference only where the rank's own order shows the
  // message's memory stable (no cross-rank path is known).
  static std::shared_ptr<const VerifiedAlgorithm> fromFamily(ir::Algorithm part, int rank, int root,
                                                             std::string basis);

  const ir::Algorithm& algo() const { return algo_; }
  int root() const { return root_; }  // rooted collectives; -1 otherwise
  // The rank a part holds; -1 for a whole algorithm.
  int partRank() const { return part_; }
  // Empty when the verifier proved this algorithm (or the whole it is a
  // part of); else what proves its family (fromFamily).
  const std::string& basis() const { return basis_; }
  // Rank `rank`'s by-reference plan for in-place or out-of-place calls
  // (a part: its own rank only). Computed once, thread-safe.
  const RefPlan& refPlan(int rank, bool inplace) const;

 private:
  ir::Algorithm algo_;
  int root_ = -1;
  int part_ = -1;
  std::string basis_;
  // With lags (ir::Step::lag), one slice's order (ir::sliceOrder), which
  // references are planned on, and where each step of algo_ is in it.
  std::unique_ptr<ir::Algorithm> sliceAlgo_;
  std::vector<std::vector<std::vector<int>>> slicePosition_;
  // Refers to sliceAlgo_ where set, else algo_; a whole algorithm's.
  std::unique_ptr<verify::StepGraph> graph_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<int, bool>, std::unique_ptr<RefPlan>> plans_;
};

// Rank `rank`'s by-reference plan in `algo` from the happens-before graph
// `g` of `algo` (which may hold only some ranks: paths through the missing
// ones are not seen, so the plan only gets more cautious).
RefPlan planReferences(const ir::Algorithm& algo, const verify::StepGraph& g, int rank,
                       bool inplace);

// One rank's arguments, as in NCCL: element count per the collective's
// convention (allgather: send count; reducescatter: receive count; alltoall:
// count per peer), host buffers.
struct CallArgs {
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

// Sizes shared by all ranks of one call (docs/spec/IR.md section 3; ir/slicing.h).
struct Geometry : ir::Slicing {
  bool inplace = false;
};

// docs/spec/IR.md section 3's sizes (ir.h), also under these names.
using ir::countMultiplier;
using ir::countQuantum;
using ir::sliceBytesOf;

// Elements of one rank's input and output buffer for a call of `count`
// (allgather output and reducescatter input span all ranks; for gather and
// scatter, m = 1: `count` is the root's whole buffer, a rank's share
// count / n).
std::pair<size_t, size_t> bufferElems(const ir::Algorithm& a, size_t count);
std::pair<size_t, size_t> bufferElems(CollectiveKind coll, int nranks, size_t count);

// Collectives whose output is a reduction: the ones avg applies to (the
// output is divided by the rank count once reduced).
inline bool reducesToOutput(CollectiveKind k) { return traits(k).reduces; }

// Whether rank `rank`'s call of a `coll` collective on `nranks` ranks is in
// place: NCCL's rule (allgather: send == recv + rank x count; reducescatter:
// recv == send + rank x count; gather and scatter the same with their share
// count / nranks; otherwise send == recv).
bool isInPlaceCall(CollectiveKind coll, const CallArgs& c, int rank, int nranks);

// Checks one call against the algorithm and computes its geometry. Errors
// (kInvalidArgument) name what is wrong: mismatched arguments across ranks,
// a count not divisible by the chunking, null buffers, a call form (in-place
// or not) the algorithm does not allow, avg on a collective that does not
// reduce. `sliceBytes` 0 = the algorithm's (ir::sliceBytesOf).
Result<Geometry> planCall(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls,
                          size_t sliceBytes);
// The same checks for one rank's arguments alone (ranks in other processes
// cannot compare arguments; the rest of planCall's checks need all ranks).
Result<Geometry> planRankCall(const VerifiedAlgorithm& va, int rank, const CallArgs& call,
                              size_t sliceBytes);

enum class Progress { kProgress, kBlocked, kDone };

// What runRankLoop drives: one rank's part of a call, advanced without
// blocking until done (RankExecutor for algorithms, P2pExchange for sends
// and receives).
class Steppable {
 public:
  virtual ~Steppable() = default;
  virtual Progress advance() = 0;
  virtual bool done() const = 0;
  virtual void reset() = 0;
  virtual const Status& failure() const = 0;
  virtual bool sendsDrained() const = 0;
  virtual std::vector<std::string> waiting() const = 0;
  // The call failed: withdraws every posted receive (RecvPort::abandon), so
  // nothing writes to the call's buffers once the call has returned.
  virtual void abandon() {}
  // The transport the rank drives while it waits (runRankLoop), or nullptr:
  // long local work (copies, reductions) polls it between pieces.
  virtual void pollDuring(Poller* poller) { (void)poller; }
};

class RankExecutor final : public Steppable {
 public:
  // `sendPorts[t]` / `recvPorts[t]`: the ports of threadblock t's send and
  // receive peers (nullptr where it has none). `scratch` holds s_chunks
  // chunks. All pointers must outlive the executor.
  RankExecutor(const VerifiedAlgorithm& va, int rank, const CallArgs& call, const Geometry& g,
               std::vector<SendPort*> sendPorts, std::vector<RecvPort*> recvPorts, void* scratch);

  // Runs every threadblock as far as it can without blocking. kProgress if
  // any step ran (the rank may have finished), kBlocked if none could, kDone
  // if nothing was left to run.
  Progress advance() override;
  bool done() const override { return doneTbs_ == static_cast<int>(tbs_.size()); }
  // Back to the start of the call, to run it again on the same buffers.
  void reset() override;
  // Not ok once a message arrived that does not fit its receiving step (the
  // ranks' arguments disagree: possible only across processes, which do not
  // compare every call's arguments). The rank cannot go on.
  const Status& failure() const override { return failure_; }
  // True when every message this rank sent has been released by its
  // receiver: messages sent by reference point into this rank's buffers, so
  // a rank's call may only return once this holds.
  bool sendsDrained() const override;
  // Sending steps that travel by reference (one copy per hop), for tests.
  int refSteps() const;
  // Runs exactly one step: threadblock `tb`'s step `step` of iteration
  // `iteration`. kInvalidArgument naming the step and what it waits for
  // when that is not the threadblock's next step or it cannot run now.
  Status runStep(int tb, int step, size_t iteration);
  // For deadlock reports: one line per unfinished threadblock,
  // "tb 2 step 5 (rrs, iteration 0): waiting for a message from rank 3 on channel 1".
  std::vector<std::string> waiting() const override;
  void abandon() override;
  void pollDuring(Poller* poller) override { poller_ = poller; }

 private:
  struct TbState {
    size_t iter = 0;         // iteration of its loop (a step of lag L moves slice iter - L)
    size_t end = 0;          // its loop's iterations: the call's slices plus its largest lag
    int pc = 0;              // step within the iteration
    uint64_t completed = 0;  // steps completed (or skipped, lagged) over all iterations
  };
  bool tryStep(int t);
  bool finishStep(int t);
  // memcpy and reduce, in pieces with poller_ polled between them: the
  // sockets this thread drives keep moving while it copies or reduces
  // (otherwise a 2 MiB reduction leaves them idle for its whole length).
  void copy(void* dst, const void* src, size_t bytes);
  void reduceInto(void* dst, const void* a, const void* b, size_t n);
  // work(first, count) over `elems` elements of `elemBytes`, in 256 KiB
  // pieces with poller_ polled between them (in one piece without one).
  template <class Work>
  void inPieces(size_t elems, size_t elemBytes, Work work);
  unsigned char* chunkPtr(ir::Buffer b, int chunk, size_t iter) const;
  std::string blockedOn(int t) const;
  // Whether step `s`'s dependency (if any) has moved what `slice` needs.
  bool dependencyMet(const ir::Step& s, size_t slice) const;
  // Why threadblock t's next step cannot take the message it peeked (`got`
  // bytes marked `mark`; it expects `msgBytes`): the first of the call's
  // signature, its slices left or its bytes that differs.
  std::string mismatch(int t, size_t got, uint32_t mark, size_t msgBytes) const;
  void planRefs();

  const VerifiedAlgorithm& va_;
  const ir::Algorithm& algo_;
  const ir::Rank& rank_;
  CallArgs call_;
  Geometry g_;
  std::vector<SendPort*> sendPorts_;
  std::vector<RecvPort*> recvPorts_;
  unsigned char* base_[ir::kNumBuffers];
  std::vector<TbState> tbs_;
  // byRef_[t][i]: whether step i of tb t may send its message by reference
  // (a RefKind: the algorithm's plan, less the ports that take none).
  std::vector<std::vector<uint8_t>> byRef_;
  // Whether step i of tb t sends this run's `msgBytes` message by reference
  // (byRef_, the port's sizes, mappable memory).
  bool sendsByRef(int t, int i, size_t msgBytes) const;
  // The mappable region its message lies in this run, if the port takes it.
  const SharedRegion* refRegion(int t, int i) const;
  void findRegions();
  // Per buffer: its bytes, and the mappable region (shared_buffers.h) it
  // lies in this run, if any.
  size_t extent_[ir::kNumBuffers] = {0, 0, 0};
  std::optional<SharedRegion> regions_[ir::kNumBuffers];
  bool mappable_ = false;                      // some port takes references to mappable memory
  uint64_t regionsGeneration_ = ~uint64_t{0};  // shared_buffers::generation() of regions_
  int doneTbs_ = 0;
  bool reduces_ = false;    // the call's operation matters (the collective reduces)
  uint32_t signature_ = 0;  // of this call, in every message's mark (executor.cc)
  Status failure_;
  Poller* poller_ = nullptr;
};

}  // namespace chorus::runtime
