// libchorus-nccl's answers to NCCL's device API (nccl_device.h) on a live
// communicator: teams by NCCL's formulas with an LSA team of the rank
// alone, device communicators refused with ncclInvalidUsage and a reason,
// handles that are not communicators refused, the requirement builders'
// NULL checks, the GIN barrier's one signal per barrier, and every name's
// pncclX twin. Ranks on host threads (CHORUS_NCCL_HOST=1), so no GPU is
// needed. NCCL's own answers to the arithmetic are compared in
// nccl_differential_test.cc.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstdlib>
#include <string>
#include <vector>

extern "C" void ncclResetDebugInitInternal();

namespace {

class DeviceApi : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("CHORUS_NCCL_HOST", "1", 1);  // before the library reads its settings
    comms_.assign(3, nullptr);
    ASSERT_EQ(ncclCommInitAll(comms_.data(), 3, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  }
  void TearDown() override {
    for (ncclComm_t c : comms_) {
      if (c != nullptr) {
        EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
      }
    }
  }
  std::vector<ncclComm_t> comms_;
};

bool same(ncclTeam_t a, ncclTeam_t b) {
  return a.nRanks == b.nRanks && a.rank == b.rank && a.stride == b.stride;
}

TEST_F(DeviceApi, TeamsFollowNcclsFormulasWithTheRankAloneInItsLsaTeam) {
  for (int r = 0; r < 3; ++r) {
    ncclComm_t c = comms_[static_cast<size_t>(r)];
    ncclTeam_t world = ncclTeamWorld(c), lsa = ncclTeamLsa(c), rail = ncclTeamRail(c);
    EXPECT_TRUE(same(world, ncclTeam_t{3, r, 1}));
    EXPECT_TRUE(same(lsa, ncclTeam_t{1, 0, 1}));
    EXPECT_TRUE(same(rail, ncclTeam_t{3, r, 1}));
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(ncclTeamRankToWorld(c, world, k), k);
      EXPECT_EQ(ncclTeamRankToWorld(c, rail, k), k);
    }
    EXPECT_EQ(ncclTeamRankToWorld(c, lsa, 0), r);
    EXPECT_EQ(ncclTeamRankToLsa(c, lsa, 0), 0);
    EXPECT_EQ(ncclTeamRankToLsa(c, world, r), 0);
  }
  // A handle that is not a live communicator: an empty team, rank -1.
  EXPECT_TRUE(same(ncclTeamWorld(nullptr), ncclTeam_t{0, 0, 0}));
  EXPECT_TRUE(same(ncclTeamLsa(nullptr), ncclTeam_t{0, 0, 0}));
  EXPECT_EQ(ncclTeamRankToWorld(nullptr, ncclTeam_t{3, 0, 1}, 1), -1);
  EXPECT_EQ(ncclTeamRankToLsa(nullptr, ncclTeam_t{3, 0, 1}, 1), -1);
}

TEST_F(DeviceApi, DeviceCommunicatorsAreRefusedWithAReason) {
  ncclDevCommRequirements_t reqs{};
  ncclDevComm_t dev{};
  EXPECT_EQ(ncclDevCommCreate(comms_[0], &reqs, &dev), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(comms_[0])).find("no device communicator"),
            std::string::npos)
      << ncclGetLastError(comms_[0]);
  EXPECT_EQ(ncclDevCommDestroy(comms_[0], &dev), ncclInvalidUsage);
  EXPECT_EQ(ncclDevCommCreate(nullptr, &reqs, &dev), ncclInvalidArgument);
  EXPECT_EQ(ncclDevCommCreate(comms_[0], nullptr, &dev), ncclInvalidArgument);
  EXPECT_EQ(ncclDevCommCreate(comms_[0], &reqs, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclDevCommDestroy(comms_[0], nullptr), ncclInvalidArgument);
}

TEST_F(DeviceApi, RequirementBuilders) {
  ncclDevResourceRequirements_t r{};
  ncclGinBarrierHandle_t gin{};
  ASSERT_EQ(ncclGinBarrierCreateRequirement(comms_[0], ncclTeamWorld(comms_[0]), 5, &gin, &r),
            ncclSuccess);
  EXPECT_EQ(r.ginSignalCount, 5);
  EXPECT_EQ(r.outGinSignalStart, &gin.signal0);
  EXPECT_EQ(r.outBufferHandle, &gin.bufHandle);
  EXPECT_EQ(ncclGinBarrierCreateRequirement(comms_[0], ncclTeamWorld(comms_[0]), 5, nullptr, &r),
            ncclInvalidArgument);
  ncclLsaBarrierHandle_t lsa{};
  EXPECT_EQ(ncclLsaBarrierCreateRequirement(ncclTeam_t{4, 1, 1}, 2, &lsa, nullptr),
            ncclInvalidArgument);
  ncclLLA2AHandle_t a2a{};
  EXPECT_EQ(ncclLLA2ACreateRequirement(1, 1, nullptr, &r), ncclInvalidArgument);
  EXPECT_EQ(ncclLLA2ACreateRequirement(1, 1, &a2a, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclLLA2ACalcSlots(10, 16), 20);
  ncclResetDebugInitInternal();  // exported, as NCCL's is
}

TEST_F(DeviceApi, EveryNameHasItsProfilingTwin) {
  for (const char* name :
       {"ncclDevCommCreate", "ncclDevCommDestroy", "ncclTeamWorld", "ncclTeamLsa", "ncclTeamRail",
        "ncclTeamRankToWorld", "ncclTeamRankToLsa", "ncclLsaBarrierCreateRequirement",
        "ncclGinBarrierCreateRequirement", "ncclLLA2ACalcSlots", "ncclLLA2ACreateRequirement"}) {
    void* f = dlsym(RTLD_DEFAULT, name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(dlsym(RTLD_DEFAULT, (std::string("p") + name).c_str()), f) << name;
  }
}

}  // namespace
