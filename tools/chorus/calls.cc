#include "tools/chorus/calls.h"

#include <string>

#include "core/collectives.h"

namespace chorus::cli {

ApiResult callCollective(const Comm& comm, CollectiveKind k, const void* send, void* recv,
                         size_t count, chorusDataType_t type, chorusRedOp_t op, int root, int r,
                         int n) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return comm.allReduce(send, recv, count, type, op);
    case CollectiveKind::kAllGather:
      return comm.allGather(send, recv, count, type);
    case CollectiveKind::kReduceScatter:
      return comm.reduceScatter(send, recv, count, type, op);
    case CollectiveKind::kAllToAll:
      return comm.allToAll(send, recv, count, type);
    case CollectiveKind::kBroadcast:
      return comm.broadcast(send, recv, count, type, root);
    case CollectiveKind::kReduce:
      return comm.reduce(send, recv, count, type, op, root);
    case CollectiveKind::kGather:
      return comm.gather(send, recv, count, type, root);
    case CollectiveKind::kScatter:
      return comm.scatter(send, recv, count, type, root);
    case CollectiveKind::kSend: {
      chorusGroupStart();
      ApiResult sent = comm.send(send, count, type, (r + 1) % n);
      ApiResult got = comm.recv(recv, count, type, (r + n - 1) % n);
      ApiResult all = check(chorusGroupEnd());
      return !sent.ok() ? sent : !got.ok() ? got : all;
    }
    case CollectiveKind::kRecv:
    case CollectiveKind::kAllToAllv:
    case CollectiveKind::kCustom:
      break;
  }
  return {chorusInvalidArgument,
          "chorus: no C API call stands for collective '" + std::string(collectiveName(k)) + "'"};
}

size_t ncclTestsFactor(CollectiveKind k, int n) {
  return countMultiplier(k, n) > 1 || countsWholeVector(k) ? static_cast<size_t>(n) : 1;
}

}  // namespace chorus::cli
