#include "api/convert.h"

#include <string>

namespace chorus::api {

// chorus.h's enums number types and ops as the NCCL ABI does: core keeps
// the one table (dataTypeFromAbi, abiCode).
static_assert(chorusNumTypes == kNumDataTypes && chorusNumOps == kNumReduceOps);

Result<DataType> fromC(chorusDataType_t t) {
  if (std::optional<DataType> d = dataTypeFromAbi(static_cast<int>(t))) return *d;
  return Status(StatusCode::kInvalidArgument,
                "unknown data type " + std::to_string(static_cast<int>(t)));
}

chorusDataType_t toC(DataType t) { return static_cast<chorusDataType_t>(abiCode(t)); }

Result<ReduceOp> fromC(chorusRedOp_t op) {
  if (std::optional<ReduceOp> o = reduceOpFromAbi(static_cast<int>(op))) return *o;
  return Status(StatusCode::kInvalidArgument,
                "unknown reduction op " + std::to_string(static_cast<int>(op)));
}

chorusRedOp_t toC(ReduceOp op) { return static_cast<chorusRedOp_t>(abiCode(op)); }

}  // namespace chorus::api
