// How a staged GPU rank (runtime/device_backend.h: a rank whose peers are in other
// processes) moves one group of its calls through host memory: which device
// buffers are copied to the host before the run, which are copied back
// after it, and where each call's buffers sit in them. Pure (no CUDA), so it
// is tested on any machine.
#pragma once

#include <vector>

#include "api/world.h"
#include "runtime/device_backend.h"

namespace chorus::api {

// What a call reads and writes at `rank` of `nranks`: bytes of its send and
// receive buffers, and whether each is read / written there (a root-only
// buffer is neither elsewhere).
struct Extents {
  size_t send = 0, recv = 0;
  bool reads = true, writes = true;
};
Extents extents(const Op& op, int rank, int nranks);

struct StagingPlan {
  // Buffers that overlap (in-place calls; one call of the group reading what
  // an earlier one wrote) are one region; a region merged from several is
  // copied in whole, so bytes no call writes come back as they were.
  std::vector<runtime::StagedRegion> regions;
  struct Where {
    int sendRegion = -1, recvRegion = -1;  // -1: none (NULL, or nothing to move)
    size_t sendOff = 0, recvOff = 0;       // bytes into the region
  };
  std::vector<Where> where;  // per op
};
StagingPlan planStaging(const std::vector<Op>& ops, int rank, int nranks);

}  // namespace chorus::api
