// The vocabulary every layer shares: element data types, reduction ops and
// collective kinds, with their canonical names, plus exact conversions of the
// narrow floating-point types (fp16, bf16, fp8) to and from float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace chorus {

enum class DataType {
  kInt8,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,
  kBfloat16,
  kFloat32,
  kFloat64,
  kFp8E4M3,
  kFp8E5M2,
};
inline constexpr int kNumDataTypes = 12;

size_t dataTypeSize(DataType t);
std::string_view dataTypeName(DataType t);  // "fp16", "bf16", "fp8e4m3", ...
std::optional<DataType> parseDataType(std::string_view name);
bool isFloatingPoint(DataType t);

enum class ReduceOp { kSum, kProd, kMax, kMin, kAvg };
inline constexpr int kNumReduceOps = 5;

// The numbering of data types and ops on the NCCL ABI, which chorus.h's
// enums share (ncclInt8 = chorusInt8 = 0, ..., ncclFloat8e5m2 = 11;
// ncclSum = 0, ..., ncclAvg = 4). Our own enums order types differently.
// nullopt for a code outside it.
std::optional<DataType> dataTypeFromAbi(int code);
int abiCode(DataType t);
std::optional<ReduceOp> reduceOpFromAbi(int code);
int abiCode(ReduceOp op);
std::string_view reduceOpName(ReduceOp op);
std::optional<ReduceOp> parseReduceOp(std::string_view name);

enum class CollectiveKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kReduce,
  kSend,
  kRecv,
  kGather,
  kScatter,
  kAllToAllv,
  kCustom,  // any other name: semantics come from a user specification
};
std::string_view collectiveName(CollectiveKind k);  // canonical MSCCL spelling
// Accepts the canonical names and "reduce_scatter"; anything else is kCustom.
CollectiveKind parseCollective(std::string_view name);
// Whether the collective has a single root rank (broadcast, reduce, gather, scatter).
bool isRooted(CollectiveKind k);
// Gather and scatter: docs/spec/IR.md section 3's m = 1, so the runtime counts a call
// over the root's whole vector and a rank's share is count / n (their C
// calls, like NCCL's, count per rank).
bool countsWholeVector(CollectiveKind k);
// The six collectives with NCCL's fixed signatures: allreduce, allgather,
// reducescatter, alltoall, broadcast, reduce.
bool isNcclCollective(CollectiveKind k);
// nccl-tests' bus bandwidth factor for `k` on `n` ranks (busbw = algbw x it):
// what each rank's links carry relative to the message size.
double busBandwidthFactor(CollectiveKind k, int n);

// Narrow floating-point conversions. float -> narrow rounds to nearest even.
// Overflow: fp16 and bf16 give infinity (IEEE); fp8 saturates to the largest
// finite value (the "satfinite" mode ML frameworks and NCCL use). NaN stays NaN.
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
uint16_t floatToBfloat16(float f);
float bfloat16ToFloat(uint16_t b);
uint8_t floatToFp8E4M3(float f);  // OCP E4M3FN: bias 7, no infinities, max 448
float fp8E4M3ToFloat(uint8_t v);
uint8_t floatToFp8E5M2(float f);  // OCP E5M2: bias 15, infinities, max 57344
float fp8E5M2ToFloat(uint8_t v);

}  // namespace chorus
