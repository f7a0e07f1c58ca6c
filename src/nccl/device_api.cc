// libchorus-nccl: the host side of NCCL's device API (nccl_device.h), in a
// file of its own because that header defines ncclWindow_vidmem, which
// nccl.cc defines as Chorus's window (this file is kept out of the unity
// build for the same reason).
//
// Chorus has no device communicator: its kernels are its executor's, and
// no peer memory is mapped for kernels of the application's. So
// ncclDevCommCreate / ncclDevCommDestroy refuse with ncclInvalidUsage,
// saying so. The teams answer as NCCL's formulas do for a communicator
// whose load/store-accessible (LSA) team is the rank alone: world is
// every rank, LSA is {1 rank, rank 0}, the rail is the world (NCCL: the
// ranks with the same LSA index). The requirement builders are NCCL 2.28's
// arithmetic (tests/nccl/nccl_differential_test.cc compares them with
// NCCL's); the requirements they make can only be handed to
// ncclDevCommCreate. PyTorch imports these names (its symmetric memory),
// so a library without them does not load.

#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstdint>
#include <string>

#include "nccl/shim.h"

using chorus::nccl_shim::fail;
using chorus::nccl_shim::rankAndSize;

using chorus::nccl_shim::guarded;

namespace {

// `f()`, or `onError` if it throws: nothing escapes a C entry point.
template <class T, class F>
T noThrow(T onError, F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return onError;
  }
}

}  // namespace

extern "C" {

ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                               ncclDevComm_t* outDevComm) {
  return guarded("ncclDevCommCreate", [&]() -> ncclResult_t {
    int rank = 0, size = 0;
    if (ncclResult_t r = rankAndSize(comm, "ncclDevCommCreate", &rank, &size); r != ncclSuccess)
      return r;
    NCCL_PTR_CHECK(reqs, "ncclDevCommCreate", "reqs");
    NCCL_PTR_CHECK(outDevComm, "ncclDevCommCreate", "outDevComm");
    return fail(ncclInvalidUsage,
                "ncclDevCommCreate: libchorus-nccl has no device communicator (NCCL's device "
                "API, nccl_device.h, is not served: docs/nccl.md)");
  });
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm) {
  return guarded("ncclDevCommDestroy", [&]() -> ncclResult_t {
    int rank = 0, size = 0;
    if (ncclResult_t r = rankAndSize(comm, "ncclDevCommDestroy", &rank, &size); r != ncclSuccess)
      return r;
    NCCL_PTR_CHECK(devComm, "ncclDevCommDestroy", "devComm");
    return fail(ncclInvalidUsage,
                "ncclDevCommDestroy: libchorus-nccl made no device communicator to destroy");
  });
}

ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  return noThrow(ncclTeam_t{}, [&] {
    ncclTeam_t t{};
    if (rankAndSize(comm, "ncclTeamWorld", &t.rank, &t.nRanks) == ncclSuccess) t.stride = 1;
    return t;
  });
}

ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  return noThrow(ncclTeam_t{}, [&] {
    int rank = 0, size = 0;
    if (rankAndSize(comm, "ncclTeamLsa", &rank, &size) != ncclSuccess) return ncclTeam_t{};
    return ncclTeam_t{1, 0, 1};  // the rank alone
  });
}

ncclTeam_t ncclTeamRail(ncclComm_t comm) {
  return noThrow(ncclTeam_t{}, [&] {
    ncclTeam_t t{};
    if (rankAndSize(comm, "ncclTeamRail", &t.rank, &t.nRanks) == ncclSuccess)
      t.stride = 1;  // LSA size 1
    return t;
  });
}

int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  return noThrow(-1, [&] {
    int self = 0, size = 0;
    if (rankAndSize(comm, "ncclTeamRankToWorld", &self, &size) != ncclSuccess) return -1;
    return self + (rank - team.rank) * team.stride;
  });
}

int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  return noThrow(-1, [&] {
    int self = 0, size = 0;
    if (rankAndSize(comm, "ncclTeamRankToLsa", &self, &size) != ncclSuccess) return -1;
    return 0 + (rank - team.rank) * team.stride;  // the rank is LSA rank 0 of its team of 1
  });
}

ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq) {
  return guarded("ncclLsaBarrierCreateRequirement", [&]() -> ncclResult_t {
    NCCL_PTR_CHECK(outHandle, "ncclLsaBarrierCreateRequirement", "outHandle");
    NCCL_PTR_CHECK(outReq, "ncclLsaBarrierCreateRequirement", "outReq");
    *outReq = ncclDevResourceRequirements_t{};
    outHandle->nBarriers = nBarriers;
    // Per barrier: three words of state and one inbox word per team rank.
    outReq->bufferSize =
        static_cast<size_t>(3 * nBarriers + nBarriers * team.nRanks) * sizeof(uint32_t);
    outReq->bufferAlign = alignof(uint32_t);
    outReq->outBufferHandle = &outHandle->bufHandle;
    return ncclSuccess;
  });
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq) {
  return guarded("ncclGinBarrierCreateRequirement", [&]() -> ncclResult_t {
    (void)comm;
    (void)team;
    NCCL_PTR_CHECK(outHandle, "ncclGinBarrierCreateRequirement", "outHandle");
    NCCL_PTR_CHECK(outReq, "ncclGinBarrierCreateRequirement", "outReq");
    *outReq = ncclDevResourceRequirements_t{};
    // One signal per barrier, and an epoch word per barrier and GIN context.
    outReq->bufferSize = static_cast<size_t>(nBarriers) * NCCL_GIN_MAX_CONTEXTS * sizeof(uint32_t);
    outReq->bufferAlign = alignof(uint32_t);
    outReq->outBufferHandle = &outHandle->bufHandle;
    outReq->ginSignalCount = nBarriers;
    outReq->outGinSignalStart = &outHandle->signal0;
    return ncclSuccess;
  });
}

int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  return maxElts * ((maxEltSize + 7) / 8);  // 8 bytes of payload per slot
}

ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq) {
  return guarded("ncclLLA2ACreateRequirement", [&]() -> ncclResult_t {
    NCCL_PTR_CHECK(outHandle, "ncclLLA2ACreateRequirement", "outHandle");
    NCCL_PTR_CHECK(outReq, "ncclLLA2ACreateRequirement", "outReq");
    outHandle->nSlots = static_cast<uint32_t>(nSlots);
    *outReq = ncclDevResourceRequirements_t{};
    // Per block: a 16-byte header and two banks of nSlots 16-byte slots.
    outReq->bufferSize = static_cast<size_t>(nBlocks) * static_cast<size_t>(1 + 2 * nSlots) * 16;
    outReq->bufferAlign = 16;
    outReq->outBufferHandle = &outHandle->bufHandle;
    return ncclSuccess;
  });
}

// The profiling names (pncclX), as NCCL exports them.
#define CHORUS_PNCCL(ret, name, params) ret p##name params __attribute__((alias(#name)));
CHORUS_PNCCL(ncclResult_t, ncclDevCommCreate,
             (ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*))
CHORUS_PNCCL(ncclResult_t, ncclDevCommDestroy, (ncclComm_t, ncclDevComm_t const*))
CHORUS_PNCCL(ncclTeam_t, ncclTeamWorld, (ncclComm_t))
CHORUS_PNCCL(ncclTeam_t, ncclTeamLsa, (ncclComm_t))
CHORUS_PNCCL(ncclTeam_t, ncclTeamRail, (ncclComm_t))
CHORUS_PNCCL(int, ncclTeamRankToWorld, (ncclComm_t, ncclTeam_t, int))
CHORUS_PNCCL(int, ncclTeamRankToLsa, (ncclComm_t, ncclTeam_t, int))
CHORUS_PNCCL(ncclResult_t, ncclLsaBarrierCreateRequirement,
             (ncclTeam_t, int, ncclLsaBarrierHandle_t*, ncclDevResourceRequirements_t*))
CHORUS_PNCCL(ncclResult_t, ncclGinBarrierCreateRequirement,
             (ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*, ncclDevResourceRequirements_t*))
CHORUS_PNCCL(int, ncclLLA2ACalcSlots, (int, int))
CHORUS_PNCCL(ncclResult_t, ncclLLA2ACreateRequirement,
             (int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*))
#undef CHORUS_PNCCL

}  // extern "C"
