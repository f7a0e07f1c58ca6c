// Each rank of a multi-process communicator sleeps on a doorbell in a small
// segment of its own that its same-host peers map: a peer rings it when it
// has put something where the rank looks (a shared ring), a transport's
// progress thread when something arrived (a socket). The segment also
// carries the cross-memory attach probe: whether the ranks of this host may
// read one another's memory (single copies).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/transport/local_transport.h"
#include "runtime/transport/shm.h"

namespace chorus::runtime {

class RankBells {
 public:
  // Collective: `prefix` is the communicator's segment name prefix. Only
  // the bells of ranks with `unmapped[r]` false (peers on this host linked
  // by shared memory) are mapped. With `tryCrossMemory`
  // (every rank must pass the same) each rank also tries to read a word in
  // each mapped peer's memory with cross-memory attach; crossMemoryAttach()
  // then says whether every rank could (a container or Yama's ptrace_scope
  // may forbid it).
  static Result<std::unique_ptr<RankBells>> create(const std::string& prefix, int me, int n,
                                                   Bootstrap& boot,
                                                   const std::vector<bool>& unmapped,
                                                   bool tryCrossMemory = false);
  Doorbell& bell(int rank) { return *bells_[static_cast<size_t>(rank)]; }
  int me() const { return me_; }
  bool crossMemoryAttach() const { return crossMemory_; }
  // Shared-memory messages this large or larger travel by reference when
  // crossMemoryAttach(): below it, a copy through the ring costs less than
  // the system call.
  static constexpr size_t kMinRefBytes = size_t{64} << 10;

 private:
  int me_ = 0;
  bool crossMemory_ = false;
  uint64_t probe_ = 0;  // a peer reads this to see whether it can
  std::vector<std::unique_ptr<Segment>> segments_;
  std::vector<Doorbell*> bells_;
};

}  // namespace chorus::runtime
