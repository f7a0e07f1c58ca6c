// Choosing the algorithm for a call (docs/spec/IR.md section 7): algorithm files from
// CHORUS_ALGO_DIR, MSCCL_ALGO_DIR and MSCCL_XML_FILES, and files registered
// through the API, are candidates in that order (each directory's files in
// sorted order); the first eligible one runs, otherwise a built-in does.
// Every decision can be explained: select() says, per candidate, why it was
// or was not eligible (logged per call with CHORUS_DEBUG=INFO).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/types.h"
#include "ir/xml_reader.h"
#include "runtime/exec/executor.h"
#include "verify/plan_verifier.h"

namespace chorus::runtime {

// Past this many ranks a process does not verify a built-in or a program
// file whole: it builds its own rank's part alone, which rests on the
// family's proof (docs/scale.md). CHORUS_PROVE_RANKS sets it.
inline constexpr int kProveRanks = 256;
int proveRanksFromEnvironment();

// Reads and verifies one algorithm file. Errors name the file (and line for
// parse errors) and quote the verifier. `programs`: how to expand a compact
// program file (compiler::programFiles(); null: such a file is refused).
Result<std::shared_ptr<const VerifiedAlgorithm>> loadVerifiedFile(
    const std::string& path, const ir::ProgramFiles* programs = nullptr);

// One call as selection sees it.
struct SelectionRequest {
  CollectiveKind collective = CollectiveKind::kAllReduce;
  int nranks = 1;
  bool inplace = false;
  size_t count = 0;  // NCCL's convention for the collective (CallArgs::count)
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = -1;  // rooted collectives only
  // Every rank reaches every other through memory (threads of one process,
  // processes of one host): built-ins that send every block one hop win
  // there; across hosts the ring's fewer, longer messages do, except for
  // small calls on CPU ranks (below).
  bool sharedMemory = true;
  // The rank this process runs alone (a process of a multi-process world),
  // or -1: every rank of the call runs here.
  int focus = -1;
  // The ranks are GPUs (the CUDA executor), not CPU threads or processes.
  // Across hosts CPU ranks pay a system call and often a wake-up per message
  // round, so one round beats the ring's n - 1 for small calls.
  bool gpu = false;
  // GPU ranks: built-ins run on LL's slots for calls of at most this many
  // bytes (planner.h; CHORUS_GPU_LL_BYTES). 0: never, since Simple's slots
  // were faster at every size from 8 B to 1 MiB on 8 ranks of an H200
  // (docs/cuda.md, "Small calls").
  size_t gpuLLBytes = 0;
};

// The call's total size in bytes (count x m x element size, docs/spec/IR.md section 3).
size_t requestBytes(const SelectionRequest& r);

// Why `va` cannot serve the call, or "" if it can. `sizeRange` applies the
// file's minBytes/maxBytes (automatic selection only; an algorithm named
// explicitly runs at any size its chunking allows).
std::string ineligibility(const VerifiedAlgorithm& va, const SelectionRequest& r,
                          bool sizeRange = true);

class AlgorithmRegistry {
 public:
  // `programs`: how to expand compact program files among the candidates
  // (compiler::programFiles(), given by the API; null: they are refused).
  explicit AlgorithmRegistry(const ir::ProgramFiles* programs = nullptr) : programs_(programs) {}
  // Loads the files named by the environment; each failure is logged (WARN)
  // with its reason and skipped. Returns the failures' messages.
  std::vector<std::string> loadFromEnvironment();
  // Loads one file and appends it to the candidates. A compact program file
  // of more than `proveRanks` ranks is not expanded: it serves processes,
  // each building and caching its own rank's part when first selected.
  Status addFile(const std::string& path, int proveRanks = proveRanksFromEnvironment());
  void add(std::string source, std::shared_ptr<const VerifiedAlgorithm> va);

  // The first eligible candidate, or nullptr (for a program file run as
  // parts, r.focus's part). `why` (optional) receives one line per
  // candidate: "FILE: chosen" or "FILE: not eligible: REASON". An error
  // when the chosen file's part cannot be built for r.focus (the other
  // ranks chose it: this one must not run anything else).
  Result<std::shared_ptr<const VerifiedAlgorithm>> select(const SelectionRequest& r,
                                                          std::vector<std::string>* why) const;
  size_t size() const;

 private:
  struct Entry {
    std::string source;
    // The whole algorithm; for a program file run as parts, rank 0's part
    // (its header is what selection reads).
    std::shared_ptr<const VerifiedAlgorithm> va;
    bool parts = false;
    std::map<int, std::shared_ptr<const VerifiedAlgorithm>> byRank;  // built parts
  };
  ir::ReadOptions readOptions(int focus) const { return {focus, programs_, &verify::planFiles()}; }
  const ir::ProgramFiles* const programs_;
  mutable std::mutex mu_;
  mutable std::vector<Entry> entries_;  // select() builds parts
};

}  // namespace chorus::runtime
