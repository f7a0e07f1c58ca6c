#include "api/convert.h"

#include <string>
#include <utility>

namespace chorus::api {

namespace {

constexpr std::pair<chorusDataType_t, DataType> kTypes[] = {
    {chorusInt8, DataType::kInt8},          {chorusUint8, DataType::kUint8},
    {chorusInt32, DataType::kInt32},        {chorusUint32, DataType::kUint32},
    {chorusInt64, DataType::kInt64},        {chorusUint64, DataType::kUint64},
    {chorusFloat16, DataType::kFloat16},    {chorusFloat32, DataType::kFloat32},
    {chorusFloat64, DataType::kFloat64},    {chorusBfloat16, DataType::kBfloat16},
    {chorusFloat8e4m3, DataType::kFp8E4M3}, {chorusFloat8e5m2, DataType::kFp8E5M2},
};

constexpr std::pair<chorusRedOp_t, ReduceOp> kOps[] = {
    {chorusSum, ReduceOp::kSum}, {chorusProd, ReduceOp::kProd}, {chorusMax, ReduceOp::kMax},
    {chorusMin, ReduceOp::kMin}, {chorusAvg, ReduceOp::kAvg},
};

}  // namespace

Result<DataType> fromC(chorusDataType_t t) {
  for (const auto& [c, d] : kTypes)
    if (c == t) return d;
  return Status(StatusCode::kInvalidArgument,
                "unknown data type " + std::to_string(static_cast<int>(t)));
}

chorusDataType_t toC(DataType t) {
  for (const auto& [c, d] : kTypes)
    if (d == t) return c;
  return chorusNumTypes;
}

Result<ReduceOp> fromC(chorusRedOp_t op) {
  for (const auto& [c, o] : kOps)
    if (c == op) return o;
  return Status(StatusCode::kInvalidArgument,
                "unknown reduction op " + std::to_string(static_cast<int>(op)));
}

chorusRedOp_t toC(ReduceOp op) {
  for (const auto& [c, o] : kOps)
    if (o == op) return c;
  return chorusNumOps;
}

}  // namespace chorus::api
