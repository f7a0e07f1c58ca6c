// Data for checking a collective end to end, as nccl-tests does: buffers for
// one call on every rank, inputs that are small integers distinct per rank
// and per chunk (so a misplaced chunk shows) and exact in every data type for
// up to 8 ranks (so float results compare bit for bit), and the closed-form
// expected output of each collective. Used by tests and by `chorus run
// --check` / `chorus perf --check`.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/exec/executor.h"
#include "runtime/transport/shared_buffers.h"
#include "verify/collective.h"

namespace chorus::runtime {

class CollectiveData {
 public:
  // Buffers for `count` elements of `type` per the collective's convention,
  // in place or not. A custom collective is checked against `spec` (its
  // constrained output chunks; avg divides by the rank count, as the
  // runtime does). Gather and scatter (no NCCL call, but algorithms) are
  // checked here. kUnsupported for collectives without a closed form here
  // (custom without a spec, send/recv, alltoallv).
  static Result<CollectiveData> make(const VerifiedAlgorithm& va, size_t count, DataType type,
                                     ReduceOp op, bool inplace,
                                     const verify::PostCondition* spec = nullptr);
  // The same for a call on `nranks` ranks (`root` for broadcast and reduce).
  // kSend stands for nccl-tests' sendrecv: every rank sends `count` elements
  // to the next rank and receives as many from the previous one.
  // `onlyRank` >= 0: buffers for that rank alone (a process of a
  // multi-process job); the other ranks' CallArgs have null buffers.
  // `mappable`: the buffers come from chorusMemAlloc's allocator
  // (shared_buffers.h), so peers in other processes read them in place.
  static Result<CollectiveData> make(CollectiveKind coll, int nranks, int root, size_t count,
                                     DataType type, ReduceOp op, bool inplace, int onlyRank = -1,
                                     bool mappable = false);

  // One CallArgs per rank, pointing into buffers this object owns.
  const std::vector<CallArgs>& calls() const { return calls_; }
  // Rewrites the inputs and fills outputs with a poison no correct result has.
  void reset();
  // Output elements that differ from the closed form; `first` (optional)
  // describes the first, e.g. "rank 3 element 17: got 0x41200000, want 0x41300000".
  size_t countWrong(std::string* first = nullptr) const;

 private:
  static Result<CollectiveData> build(CollectiveKind coll, int nranks, int root, size_t count,
                                      DataType type, ReduceOp op, bool inplace, int onlyRank,
                                      bool mappable);

  CollectiveKind collective_ = CollectiveKind::kAllReduce;
  int nranks_ = 0;
  // How many ranks' inputs one output element combines: all for the
  // collectives that reduce (and custom ones), 1 for those that move data.
  int combined() const {
    return reducesToOutput(collective_) || collective_ == CollectiveKind::kCustom ? nranks_ : 1;
  }
  int root_ = -1;
  size_t count_ = 0;
  DataType type_ = DataType::kFloat32;
  ReduceOp op_ = ReduceOp::kSum;
  bool inplace_ = false;
  size_t inElems_ = 0, outElems_ = 0;
  std::vector<shared_buffers::Block> send_, recv_;
  // Custom collectives: [rank][output chunk] -> the (rank, input chunk)
  // contributions it must hold; empty = unconstrained.
  std::vector<std::vector<std::vector<std::pair<int, int>>>> expected_;
  size_t chunkElems_ = 0;
  std::vector<CallArgs> calls_;
};

}  // namespace chorus::runtime
