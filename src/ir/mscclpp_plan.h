// MSCCL++ execution plans (issue 42): the JSON that MSCCL++'s Python DSL
// writes and its Executor runs, one-sided (a rank puts into a peer's
// registered buffer and signals; the peer waits before reading). This file
// is the format only: every field the current parser reads, read with
// checks that name the JSON path, and written back in the order the DSL
// writes, so a plan round-trips with nothing lost (keys MSCCL++ does not
// read are kept, and reported). docs/mscclpp-plan-format.md says where each
// rule comes from; verify/plan_verifier.h proves a plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostic.h"
#include "ir/ir.h"

namespace chorus::ir::mscclpp {

enum class ChannelType { kNone, kMemory, kPort, kSwitch };
enum class BufferType { kInput, kOutput, kScratch };

const char* channelTypeName(ChannelType t);  // "memory", ...
const char* bufferTypeName(BufferType t);    // "i", "o", "s"

// Every operation MSCCL++'s parser accepts, by its JSON name.
enum class OpType {
  kNop,
  kBarrier,
  kPut,
  kPutWithSignal,          // pws
  kPutWithSignalAndFlush,  // pwsf
  kGet,
  kCopy,
  kSignal,
  kWait,
  kFlush,
  kReduce,                 // re
  kReduceSend,             // res
  kReadReduce,             // rre
  kReadReduceSend,         // rres
  kPutPackets,             // ppkt
  kReadPutPackets,         // rppkt
  kReduceSendPackets,      // respkt
  kCopyPackets,            // cpkt
  kUnpackPackets,          // upkt
  kReducePackets,          // repkt
  kReduceCopyPackets,      // recpkt
  kReduceCopySendPackets,  // recspkt
  kMultiLoadReduceStore,   // glres
  kMultiStore,             // gstore
  kRelaxedSignal,          // rlxsignal
  kRelaxedWait,            // rlxwait
  kPipeline,
  kSemAcquire,
  kSemRelease,
};
const char* opTypeName(OpType t);  // the JSON name: "rres", ...
std::optional<OpType> opTypeFromName(std::string_view name);

// One entry of an op's src_buff / dst_buff: a local buffer (`type`), a
// remote one (`buffer_id`: the threadblock's remote_buffer_refs index for
// the op's channel type) or a switch channel's (`switch_channel_id`), and a
// range in chunks.
struct BufferRef {
  enum class Kind { kLocal, kRemote, kSwitch };
  Kind kind = Kind::kLocal;
  BufferType type = BufferType::kInput;  // kLocal
  int id = -1;                           // kRemote: buffer_id; kSwitch: switch_channel_id
  uint32_t index = 0, size = 0;          // in chunks
  std::string extraJson;                 // keys MSCCL++ does not read, as a JSON object
};

struct Op {
  OpType type = OpType::kNop;
  std::optional<ChannelType> channelType;
  std::optional<std::vector<int>> channelIds;  // threadblock-local indexes
  std::optional<std::vector<BufferRef>> src, dst;
  struct Tbg {
    int tbId = 0, tbgSize = 1;
  };
  std::optional<Tbg> tbg;
  std::optional<int> barrierId, numThreadblocks;
  std::optional<std::vector<int>> semaphoreIds;
  struct IterContext {
    uint64_t unitSize = 0;  // bytes
    uint32_t numChunks = 0;
  };
  std::optional<IterContext> iterContext;  // pipeline
  std::vector<Op> ops;                     // pipeline: its inner ops
  bool hasOps = false;
  std::optional<std::string> reduceOp;  // written by the DSL, not read by MSCCL++
  std::string extraJson;
};

struct RankGroup {
  int size = 0;
  std::vector<int> ranks;
};

// A GPU's channels of one type: memory/port peers (one channel each, in
// order), or switch channels over groups of ranks.
struct Channel {
  ChannelType type = ChannelType::kMemory;
  std::vector<int> connectedTo;                // memory, port
  BufferType bufferType = BufferType::kInput;  // switch
  std::vector<RankGroup> rankGroups;           // switch
  std::string extraJson;
};

struct RemoteBuffer {
  int rank = 0;
  BufferType type = BufferType::kInput;
  std::vector<ChannelType> access;
  std::string extraJson;
};

struct TbChannels {
  ChannelType type = ChannelType::kMemory;
  std::vector<int> ids;             // GPU-level channel ids of this type
  std::optional<std::string> buff;  // parsed and ignored by MSCCL++ (kept as JSON)
  std::string extraJson;
};

struct TbRemoteRefs {
  ChannelType type = ChannelType::kMemory;
  std::vector<int> ids;  // GPU-level remote buffer ids
  std::string extraJson;
};

struct Threadblock {
  int id = 0;
  std::vector<Op> ops;
  std::vector<TbChannels> channels;
  std::optional<std::vector<TbRemoteRefs>> remoteRefs;
  std::string extraJson;
};

struct Gpu {
  int id = 0;
  uint32_t inputChunks = 0, outputChunks = 0, scratchChunks = 0;
  std::vector<Threadblock> threadblocks;
  std::vector<Channel> channels;
  std::vector<RemoteBuffer> remoteBuffers;
  std::optional<std::vector<int>> semaphores;  // init values
  std::string extraJson;
};

struct Plan {
  std::string name, collective, protocol;
  bool inplace = false;
  std::optional<bool> reuseResources, useDoubleScratchBuffer;
  std::optional<uint32_t> bufferAlignment;
  std::optional<uint64_t> minMessageSize, maxMessageSize;
  std::optional<int> numThreadsPerBlock;
  std::vector<Gpu> gpus;
  std::string extraJson;

  // The values MSCCL++ uses where a key is absent.
  uint32_t alignment() const { return bufferAlignment.value_or(16); }
  int threadsPerBlock() const { return numThreadsPerBlock.value_or(1024); }
  bool packets() const { return protocol == "LL"; }
};

// MSCCL++'s executor limits (execution_common.hpp; docs/mscclpp-plan-format.md
// section 7): the loader throws past kMaxOperations; the others overflow
// fixed arrays silently. The verifier warns on each (W706); the writer
// stays inside them.
namespace limits {
inline constexpr size_t kMaxOperations = 64;       // per threadblock, pipelines flattened
inline constexpr size_t kMaxChannels = 16;         // per threadblock and type
inline constexpr size_t kMaxChannelsPerOp = 8;     // channel_ids of an op
inline constexpr size_t kMaxBufferEntries = 10;    // src_buff / dst_buff of an op
inline constexpr int kMaxBarriers = 16;            // barrier_id < 16
inline constexpr size_t kMaxSemaphoresPerOp = 16;  // semaphore_ids of an op
}  // namespace limits

struct PlanReadResult {
  std::optional<Plan> plan;  // set iff no error was found
  DiagnosticList diagnostics;
};

// Errors (E701) name the JSON path ("gpus[1].threadblocks[0].ops[6].src_buff[1]:
// ...") and, for syntax, line:column; keys MSCCL++ does not read are kept
// and noted (N702).
PlanReadResult readPlan(std::string_view text, const std::string& fileName);
// Whether `text` is an MSCCL++ plan rather than another JSON (a Chorus
// algorithm, a topology): an object whose "gpus" holds threadblocks.
bool looksLikePlan(std::string_view text);
// In the DSL's key order, indented by 2 as it writes.
std::string writePlan(const Plan& plan);

// An MSCCL algorithm (two-sided send/recv) as a one-sided plan, for MSCCL++
// users: every message of a connection (channel c, r -> p) gets its own
// slot in p's scratch, after the algorithm's own scratch; the sender puts
// into the slot, syncs its block (nop) and signals on a memory channel whose
// pair p waits on; the receiver waits, syncs and copies or reduces from the
// slot (rrs / rrcs forward with `res`). A cross-threadblock dependency is a
// semaphore of its own, released after the depended-on step and acquired
// before the dependent one. One plan form: out-of-place when the algorithm
// has it. Simple protocol whatever the algorithm's (no packets). The plan
// proves as the algorithm does (tests: every production file), but a
// threadblock may exceed MSCCL++'s 64 operations (verify warns, W706).
Plan planFromAlgorithm(const Algorithm& algo);

}  // namespace chorus::ir::mscclpp
