// What `chorus perf` and `chorus soak` share: one collective call through
// the C++ API, whichever collective it is, and nccl-tests' size convention.
#pragma once

#include <cstddef>

#include "chorus/chorus.hpp"
#include "core/types.h"

namespace chorus::cli {

// `k` on `comm` (rank `r` of `n`); kSend stands for the ring of sendrecvs
// (to the next rank, from the previous). `op` is ignored where `k` does
// not reduce, `root` where it has none. kCustom, kRecv and kAllToAllv have
// no call of their own: an error.
ApiResult callCollective(const Comm& comm, CollectiveKind k, const void* send, void* recv,
                         size_t count, chorusDataType_t type, chorusRedOp_t op, int root, int r,
                         int n);

// nccl-tests' message size is count x this x the element size: n where a
// call's count is one rank's part (allgather, reducescatter, alltoall, and
// gather and scatter as their C calls count), else 1.
size_t ncclTestsFactor(CollectiveKind k, int n);

}  // namespace chorus::cli
