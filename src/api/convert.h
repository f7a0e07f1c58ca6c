// The C API's enums <-> the library's types. One table each way, used by the
// C entry points and by tools that speak both.
#pragma once

#include "chorus/chorus.h"
#include "core/status.h"
#include "core/types.h"

namespace chorus::api {

Result<DataType> fromC(chorusDataType_t t);  // kInvalidArgument for unknown values
chorusDataType_t toC(DataType t);
Result<ReduceOp> fromC(chorusRedOp_t op);
chorusRedOp_t toC(ReduceOp op);

}  // namespace chorus::api
