// The Algorithm IR (docs/spec/IR.md): per rank, threadblocks with at
// most one send and one receive peer on one channel, each an ordered list of
// steps with explicit cross-threadblock dependencies. Every front end
// (MSCCL XML, JSON, the compiler, generators) produces it and every back end
// (verifier, simulator, runtime, writers) consumes it.
//
// Equality (operator==) compares semantics-bearing fields only; source
// positions are kept for diagnostics and ignored by ==.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/types.h"

namespace chorus::ir {

enum class Buffer : uint8_t { kInput, kOutput, kScratch };
inline constexpr int kNumBuffers = 3;
char bufferLetter(Buffer b);  // 'i', 'o', 's'
std::optional<Buffer> parseBuffer(std::string_view s);

enum class Protocol : uint8_t { kSimple, kLL, kLL128 };
std::string_view protocolName(Protocol p);  // "Simple", "LL", "LL128"
std::optional<Protocol> parseProtocol(std::string_view s);

enum class StepType : uint8_t {
  kSend,                // s
  kRecv,                // r
  kRecvCopySend,        // rcs
  kRecvReduceSend,      // rrs
  kRecvReduceCopy,      // rrc
  kRecvReduceCopySend,  // rrcs
  kCopy,                // cpy
  kReduce,              // re
  kNop,                 // nop
};
std::string_view stepTypeName(StepType t);  // the XML spelling
std::optional<StepType> parseStepType(std::string_view s);

// What an instruction does with its operands and connections (docs/spec/IR.md
// section 2). Inline: the simulator's event loop asks at every event.
namespace detail {
struct StepTypeInfo {
  std::string_view name;
  bool sends, receives, readsSrc, writesDst, readsDst, reduces;
};
// Columns: name, sends, receives, reads src, writes dst, reads dst, reduces.
inline constexpr std::array<StepTypeInfo, 9> kStepTypes = {{
    {"s", true, false, true, false, false, false},
    {"r", false, true, false, true, false, false},
    {"rcs", true, true, false, true, false, false},
    {"rrs", true, true, true, false, false, true},
    {"rrc", false, true, true, true, false, true},
    {"rrcs", true, true, true, true, false, true},
    {"cpy", false, false, true, true, false, false},
    {"re", false, false, true, true, true, true},
    {"nop", false, false, false, false, false, false},
}};
constexpr const StepTypeInfo& info(StepType t) { return kStepTypes[static_cast<size_t>(t)]; }
}  // namespace detail
constexpr bool sends(StepType t) { return detail::info(t).sends; }
constexpr bool receives(StepType t) { return detail::info(t).receives; }
// The local src operand is read; dst is written; dst is read (re: dst =
// dst + src); the reduction op is applied.
constexpr bool readsSrc(StepType t) { return detail::info(t).readsSrc; }
constexpr bool writesDst(StepType t) { return detail::info(t).writesDst; }
constexpr bool readsDst(StepType t) { return detail::info(t).readsDst; }
constexpr bool reduces(StepType t) { return detail::info(t).reduces; }

// Where an element came from in its source file (1-based; 0 = unknown).
struct SourcePos {
  int line = 0;
  int column = 0;
};

// The small fields first: 36 bytes a step, not 44 (a 4096-rank ring
// allreduce has 33.5 M steps).
struct Step {
  StepType type = StepType::kNop;
  Buffer srcBuf = Buffer::kInput;
  Buffer dstBuf = Buffer::kInput;
  bool hasDep = false;
  // Chorus's own attribute (XML `lag`, written only when set): in its
  // threadblock's slice iteration j the step moves slice j - lag of its
  // chunks, and none where that is not a slice (docs/spec/IR.md section 3).
  // So a threadblock's steps of lag 0 run `lag` slices ahead of it, as
  // rounds of chunks would put them, in a schedule of few steps. A send and
  // its receive have the same lag; a dependency's lag is at most the
  // step's. MSCCL's executor ignores it (W509): every step then moves slice
  // j, which computes the same result.
  uint16_t lag = 0;
  int srcOff = -1;
  int dstOff = -1;
  int count = 0;     // cnt
  int depTb = -1;    // depid
  int depStep = -1;  // deps
  SourcePos pos;

  bool operator==(const Step& o) const;
};
static_assert(sizeof(Step) == 36);

// One run of one step: threadblock `tb` of `rank` ran step `step` of slice
// iteration `iteration` (the simulator records them in the order they
// finish; the runtime can replay such an order).
struct StepInstance {
  int rank = 0, tb = 0, step = 0;
  size_t iteration = 0;
};

struct Threadblock {
  int id = 0;
  int sendPeer = -1;
  int recvPeer = -1;
  int channel = 0;
  std::vector<Step> steps;
  SourcePos pos;

  bool operator==(const Threadblock& o) const;
  // Its steps' largest lag (Step::lag): its loop runs the slices' iterations
  // and this many more.
  uint16_t maxLag() const;
};

struct Rank {
  int id = 0;
  int inputChunks = 0;
  int outputChunks = 0;
  int scratchChunks = 0;
  std::vector<Threadblock> tbs;
  SourcePos pos;

  int chunks(Buffer b) const {
    return b == Buffer::kInput ? inputChunks : b == Buffer::kOutput ? outputChunks : scratchChunks;
  }
  bool operator==(const Rank& o) const;
};

struct Algorithm {
  std::string name;
  Protocol protocol = Protocol::kSimple;
  int nchannels = 1;
  int nchunksPerLoop = 1;
  int ngpus = 1;
  CollectiveKind collective = CollectiveKind::kCustom;
  std::string collectiveName;  // as written (custom collectives keep their name)
  bool inplace = false;
  bool outofplace = true;
  uint64_t minBytes = 0;
  uint64_t maxBytes = 0;  // 0 = unlimited
  // Chorus's own attribute (XML `sliceBytes`, written only when set): the
  // slice, in bytes of each chunk per iteration (docs/spec/IR.md section 3),
  // that the algorithm was made for; 0 = the protocol's. A positive multiple
  // of 16. Chorus's runtimes and simulator cut slices this size unless told
  // another; MSCCL's executor ignores it (W508). A
  // schedule pipelined by slices this small needs no chunks of its own for
  // that (docs/synthesis.md, "Pipelined by slices").
  uint64_t sliceBytes = 0;
  std::vector<Rank> ranks;

  // Provenance, not compared.
  std::string sourceFile;
  SourcePos pos;
  // The algo element lacked ngpus/outofplace/minBytes/maxBytes (older msccl-tools).
  bool legacyAttributes = false;

  bool operator==(const Algorithm& o) const;

  size_t totalSteps() const;
  size_t totalThreadblocks() const;
};

// A 64-bit digest (FNV-1a) of what operator== compares but the size range
// (minBytes, maxBytes): what the simulator and the runtimes read. Equal
// algorithms have equal digests; a search that simulated an algorithm can
// tell by it that a later compilation gave the same one.
uint64_t contentDigest(const Algorithm& a);

// Whether any step has a lag (Step::lag).
bool hasLags(const Algorithm& a);
// The algorithm as one slice goes through it (docs/spec/IR.md section 3):
// a threadblock's loop reaches slice j's steps of lag L in its iteration
// j + L, so for each slice they run in the order (lag, position). Each
// threadblock's steps are stable-sorted so, their dependencies renumbered
// and every lag cleared: what the verifier proves and the runtime plans
// references on besides the file's own order. `position`, when given, gets
// the new position of each step: [rank][tb][step].
Algorithm sliceOrder(const Algorithm& a,
                     std::vector<std::vector<std::vector<int>>>* position = nullptr);

// m of docs/spec/IR.md section 3: ngpus for allgather, reducescatter and alltoall, else
// 1. The total element count of a call is count x m.
size_t countMultiplier(const Algorithm& a);
// The smallest count whose total splits into the algorithm's chunks; every
// valid count is a multiple of it.
size_t countQuantum(const Algorithm& a);
// Default slice sizes in bytes (MSCCL's): Simple 2 MiB, LL 32 KiB, LL128 576,000.
size_t defaultSliceBytes(Protocol p);
// The slice a runtime cuts where it is not told one: the algorithm's
// sliceBytes, else its protocol's default.
size_t sliceBytesOf(const Algorithm& a);

}  // namespace chorus::ir
