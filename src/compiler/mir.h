// The compiler's working form: per rank, the instructions in program order
// (the order the program recorded its operations in), each an IR step with
// its peers, channel, threadblock and dependencies still being decided.
// Every pass reads and rewrites this, and every pass's result can be printed.
#pragma once

#include <chorus/lang.hpp>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/diagnostic.h"
#include "ir/ir.h"

namespace chorus::compiler {

struct Instr {
  ir::StepType type = ir::StepType::kNop;
  int srcBuf = -1, srcIdx = -1;  // lang buffers (0 input, 1 output, 2.. scratch)
  int dstBuf = -1, dstIdx = -1;
  int count = 1;
  int sendPeer = -1, recvPeer = -1;
  int channel = 0;
  lang::Hints hints;
  const char* file = "";
  int line = 0, column = 0;
  bool dead = false;  // fused into another instruction
  int tb = -1;
  // After the dependency pass: (tb, step position) to wait for, and this
  // instruction's own position in its tb (nops before it included).
  std::vector<std::pair<int, int>> deps;
  int step = -1;
};

struct Mir {
  lang::ProgramOptions options;
  std::string file;
  int inputChunks = 0, outputChunks = 0;  // per rank, all instances
  std::vector<std::string> scratchNames;
  std::vector<int> scratchExtents;  // stated by the program (per-rank forms)
  // Scheduling: the program's operations in the order to lower them
  // (indices) with the depth of each; replication then writes `ops` in that
  // order, `depth` per operation, and empties `order` (one instance: keeps it).
  const std::vector<lang::Operation>* source = nullptr;  // the program's
  std::vector<uint32_t> order;
  std::vector<int> depth;
  // After replication: the operations to lower, in order — `ops`, or with
  // one instance the program's own (`source`) in `order`. Lowering empties both.
  std::vector<lang::Operation> ops;
  size_t opCount() const { return ops.empty() ? order.size() : ops.size(); }
  const lang::Operation& op(size_t k) const { return ops.empty() ? (*source)[order[k]] : ops[k]; }
  const char* opsFile = nullptr;     // the file of the first operation (lowering sets it)
  std::vector<lang::Expected> post;  // custom collectives, after replication
  std::vector<std::vector<Instr>> ranks;
  std::vector<int> tbCount;  // per rank, after assignment
  // Lowering runs Fusion as it appends, and the fuse pass then only makes
  // rrs (off when the lowered form is printed: it shows the sends unfused).
  bool fuseWhileLowering = true;
};

// A value per chunk of every buffer of one rank, growing on use.
template <typename T>
class PerChunk {
 public:
  explicit PerChunk(T init) : init_(init) {}
  T& at(int buffer, int index) {
    if (v_.size() <= static_cast<size_t>(buffer)) v_.resize(static_cast<size_t>(buffer) + 1);
    auto& b = v_[static_cast<size_t>(buffer)];
    if (b.size() <= static_cast<size_t>(index)) b.resize(static_cast<size_t>(index) + 1, init_);
    return b[static_cast<size_t>(index)];
  }

 private:
  T init_;
  std::vector<std::vector<T>> v_;
};

// Fusion (fuse.cc), one rank's instructions in order: a receive whose
// chunks a later send forwards unchanged becomes one instruction (rcs,
// rrcs) at the receive's place, when nothing writes those chunks in between,
// no other send to that peer on that channel comes in between (that would
// reorder the messages the peer matches by position), and both use one
// channel. Lowering runs it as it appends (the fused sends are never
// stored); the fuse pass runs it over each rank when lowering did not.
class Fusion {
 public:
  // Instruction i (everything before it seen): true if it is a send that
  // the receive it forwards now makes (that receive became rcs / rrcs).
  bool forwards(std::vector<Instr>& xs, int i);

 private:
  PerChunk<int> pending_{-1};                    // the unfused receive that last wrote each chunk
  std::map<std::pair<int, int>, int> lastSend_;  // (peer, channel) -> instruction
};

// "rank 1 tb 0 step 2 rrcs i[1] -> o[1] cnt 1 recv 0 send 2 chan 0 dep (1,3) @12"
std::string print(const Mir& m);

// A finding at an instruction's source line.
Diagnostic& report(DiagnosticList& d, DiagCode code, const Mir& m, const Instr& at, int rank,
                   std::string message);

}  // namespace chorus::compiler
