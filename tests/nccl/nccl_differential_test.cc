// libchorus-nccl against NCCL itself on what needs no GPU: both libraries are
// loaded side by side (dlopen, local symbols) and every case is called on
// each; the result codes (and strings) must agree. Cases cover versions,
// error strings, unique ids, NULL arguments, group misuse, and every call
// that needs a device on a machine without a usable one (NCCL answers
// ncclUnhandledCudaError before it looks at the arguments). Skips where NCCL
// is not installed; where a GPU is usable the no-device cases are skipped.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

struct Lib {
  void* h = nullptr;
  std::string error;
  explicit Lib(const char* path) {
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) error = dlerror();
  }
  ~Lib() {
    // NCCL leaves threads behind (its bootstrap root): never unload.
  }
  template <class F>
  F get(const char* name) const {
    void* p = dlsym(h, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }
};

#define SYM(lib, name) (lib).get<decltype(&name)>(#name)

// One case: calls the library and returns what to compare.
using Case = std::function<std::string(const Lib&)>;

std::string code(ncclResult_t r) { return "rc=" + std::to_string(static_cast<int>(r)); }

const Lib& real() {
  static Lib lib(CHORUS_REAL_NCCL);
  return lib;
}
const Lib& ours() {
  static Lib lib(CHORUS_NCCL_LIB);
  return lib;
}

bool gpuUsable() {
  int n = 0;
  bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

void compare(const std::vector<std::pair<std::string, Case>>& cases) {
  if (real().h == nullptr) GTEST_SKIP() << "NCCL not loadable here: " << real().error;
  ASSERT_NE(ours().h, nullptr) << ours().error;
  for (const auto& [name, c] : cases) {
    SCOPED_TRACE(name);
    std::string want = c(real());
    std::string got = c(ours());
    EXPECT_EQ(got, want) << name << ": NCCL gives " << want << ", Chorus " << got;
  }
}

TEST(NcclDifferential, CallsThatNeedNoDevice) {
  std::vector<std::pair<std::string, Case>> cases = {
      {"ncclGetVersion",
       [](const Lib& l) {
         int v = 0;
         ncclResult_t r = SYM(l, ncclGetVersion)(&v);
         return code(r) + " v=" + std::to_string(v);
       }},
      {"ncclGetVersion(NULL)", [](const Lib& l) { return code(SYM(l, ncclGetVersion)(nullptr)); }},
      {"ncclGetUniqueId(NULL)",
       [](const Lib& l) { return code(SYM(l, ncclGetUniqueId)(nullptr)); }},
      {"ncclGetUniqueId",
       [](const Lib& l) {
         ncclUniqueId id;
         return code(SYM(l, ncclGetUniqueId)(&id));
       }},
      {"ncclCommCount(NULL)",
       [](const Lib& l) {
         int n;
         return code(SYM(l, ncclCommCount)(nullptr, &n));
       }},
      {"ncclCommUserRank(NULL)",
       [](const Lib& l) {
         int n;
         return code(SYM(l, ncclCommUserRank)(nullptr, &n));
       }},
      {"ncclCommCuDevice(NULL)",
       [](const Lib& l) {
         int n;
         return code(SYM(l, ncclCommCuDevice)(nullptr, &n));
       }},
      {"ncclCommGetAsyncError(NULL)",
       [](const Lib& l) {
         ncclResult_t e;
         return code(SYM(l, ncclCommGetAsyncError)(nullptr, &e));
       }},
      {"ncclCommDestroy(NULL)",
       [](const Lib& l) { return code(SYM(l, ncclCommDestroy)(nullptr)); }},
      {"ncclCommAbort(NULL)", [](const Lib& l) { return code(SYM(l, ncclCommAbort)(nullptr)); }},
      {"ncclCommFinalize(NULL)",
       [](const Lib& l) { return code(SYM(l, ncclCommFinalize)(nullptr)); }},
      {"ncclCommRevoke(NULL)",
       [](const Lib& l) { return code(SYM(l, ncclCommRevoke)(nullptr, 0)); }},
      {"ncclCommRegister(NULL)",
       [](const Lib& l) {
         void* h;
         char b[8];
         return code(SYM(l, ncclCommRegister)(nullptr, b, 8, &h));
       }},
      {"ncclRedOpCreatePreMulSum(NULL comm)",
       [](const Lib& l) {
         ncclRedOp_t op;
         float s = 2;
         return code(SYM(l, ncclRedOpCreatePreMulSum)(&op, &s, ncclFloat, ncclScalarHostImmediate,
                                                      nullptr));
       }},
      {"ncclRedOpDestroy(builtin)",
       [](const Lib& l) { return code(SYM(l, ncclRedOpDestroy)(ncclSum, nullptr)); }},
      {"ncclRedOpDestroy(garbage)",
       [](const Lib& l) {
         return code(SYM(l, ncclRedOpDestroy)(static_cast<ncclRedOp_t>(-1), nullptr));
       }},
      {"ncclRedOpDestroy(user op, NULL comm)",
       [](const Lib& l) {
         return code(SYM(l, ncclRedOpDestroy)(static_cast<ncclRedOp_t>(7), nullptr));
       }},
      {"ncclGroupEnd without start", [](const Lib& l) { return code(SYM(l, ncclGroupEnd)()); }},
      {"empty group",
       [](const Lib& l) {
         ncclResult_t a = SYM(l, ncclGroupStart)();
         return code(a) + " " + code(SYM(l, ncclGroupEnd)());
       }},
      {"nested groups",
       [](const Lib& l) {
         SYM(l, ncclGroupStart)();
         SYM(l, ncclGroupStart)();
         ncclResult_t a = SYM(l, ncclGroupEnd)();
         return code(a) + " " + code(SYM(l, ncclGroupEnd)()) + " " + code(SYM(l, ncclGroupEnd)());
       }},
      {"ncclGroupSimulateEnd outside a group",
       [](const Lib& l) {
         ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
         return code(SYM(l, ncclGroupSimulateEnd)(&si));
       }},
      {"ncclGroupSimulateEnd of an empty group",
       [](const Lib& l) {
         SYM(l, ncclGroupStart)();
         ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
         return code(SYM(l, ncclGroupSimulateEnd)(&si));
       }},
      {"ncclGroupSimulateEnd, bad magic",
       [](const Lib& l) {
         SYM(l, ncclGroupStart)();
         ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
         si.magic = 1;
         ncclResult_t r = SYM(l, ncclGroupSimulateEnd)(&si);
         SYM(l, ncclGroupEnd)();  // close the group whatever the answer
         return code(r);
       }},
  };
  // Every collective on a NULL communicator, alone and inside a group (where
  // the group's end reports it again).
  auto collectives = [](const Lib& l) {
    std::vector<ncclResult_t> rs;
    float x[4] = {};
    rs.push_back(SYM(l, ncclAllReduce)(x, x, 1, ncclFloat, ncclSum, nullptr, nullptr));
    rs.push_back(SYM(l, ncclReduce)(x, x, 1, ncclFloat, ncclSum, 0, nullptr, nullptr));
    rs.push_back(SYM(l, ncclBroadcast)(x, x, 1, ncclFloat, 0, nullptr, nullptr));
    rs.push_back(SYM(l, ncclBcast)(x, 1, ncclFloat, 0, nullptr, nullptr));
    rs.push_back(SYM(l, ncclAllGather)(x, x, 1, ncclFloat, nullptr, nullptr));
    rs.push_back(SYM(l, ncclReduceScatter)(x, x, 1, ncclFloat, ncclSum, nullptr, nullptr));
    rs.push_back(SYM(l, ncclAlltoAll)(x, x, 1, ncclFloat, nullptr, nullptr));
    rs.push_back(SYM(l, ncclGather)(x, x, 1, ncclFloat, 0, nullptr, nullptr));
    rs.push_back(SYM(l, ncclScatter)(x, x, 1, ncclFloat, 0, nullptr, nullptr));
    rs.push_back(SYM(l, ncclSend)(x, 1, ncclFloat, 0, nullptr, nullptr));
    rs.push_back(SYM(l, ncclRecv)(x, 1, ncclFloat, 0, nullptr, nullptr));
    std::string s;
    for (ncclResult_t r : rs) s += code(r) + " ";
    return s;
  };
  cases.emplace_back("collectives on a NULL comm", collectives);
  cases.emplace_back("collectives on a NULL comm in a group", [collectives](const Lib& l) {
    SYM(l, ncclGroupStart)();
    std::string s = collectives(l);
    return s + "end " + code(SYM(l, ncclGroupEnd)());
  });
  compare(cases);
}

// The host side of NCCL's device API that is arithmetic: the requirement
// builders and the slot count agree with NCCL's, field by field.
TEST(NcclDifferential, DeviceApiRequirements) {
  auto req = [](const ncclDevResourceRequirements_t& r, const void* handle) {
    return " size=" + std::to_string(r.bufferSize) + " align=" + std::to_string(r.bufferAlign) +
           " signals=" + std::to_string(r.ginSignalCount) +
           " counters=" + std::to_string(r.ginCounterCount) + " bufHandle=" +
           std::to_string(reinterpret_cast<const char*>(r.outBufferHandle) -
                          static_cast<const char*>(handle)) +
           " signal0=" +
           std::to_string(reinterpret_cast<const char*>(r.outGinSignalStart) -
                          static_cast<const char*>(handle)) +
           " next=" + std::to_string(r.next == nullptr);
  };
  std::vector<std::pair<std::string, Case>> cases;
  for (auto [elts, size] : {std::pair{100, 12}, {7, 1}, {0, 8}, {3, 17}, {1, 64}})
    cases.emplace_back(
        "ncclLLA2ACalcSlots(" + std::to_string(elts) + ", " + std::to_string(size) + ")",
        [elts, size](const Lib& l) {
          return std::to_string(SYM(l, ncclLLA2ACalcSlots)(elts, size));
        });
  for (auto [blocks, slots] : {std::pair{2, 5}, {1, 0}, {32, 64}})
    cases.emplace_back(
        "ncclLLA2ACreateRequirement(" + std::to_string(blocks) + ", " + std::to_string(slots) + ")",
        [=](const Lib& l) {
          ncclLLA2AHandle_t h{};
          ncclDevResourceRequirements_t r;
          std::memset(&r, 0x5a, sizeof r);
          ncclResult_t rc = SYM(l, ncclLLA2ACreateRequirement)(blocks, slots, &h, &r);
          return code(rc) + " nSlots=" + std::to_string(h.nSlots) + req(r, &h);
        });
  for (auto [ranks, barriers] : {std::pair{8, 4}, {1, 1}, {72, 3}})
    cases.emplace_back("ncclLsaBarrierCreateRequirement(" + std::to_string(ranks) + " ranks, " +
                           std::to_string(barriers) + ")",
                       [=](const Lib& l) {
                         ncclLsaBarrierHandle_t h{};
                         ncclDevResourceRequirements_t r;
                         std::memset(&r, 0x5a, sizeof r);
                         ncclTeam_t team{ranks, 3 % ranks, 1};
                         ncclResult_t rc =
                             SYM(l, ncclLsaBarrierCreateRequirement)(team, barriers, &h, &r);
                         return code(rc) + " nBarriers=" + std::to_string(h.nBarriers) + req(r, &h);
                       });
  for (int barriers : {5, 1, 16})
    cases.emplace_back(
        "ncclGinBarrierCreateRequirement(NULL comm, " + std::to_string(barriers) + ")",
        [=](const Lib& l) {
          ncclGinBarrierHandle_t h{};
          ncclDevResourceRequirements_t r;
          std::memset(&r, 0x5a, sizeof r);
          ncclResult_t rc = SYM(l, ncclGinBarrierCreateRequirement)(nullptr, ncclTeam_t{8, 3, 1},
                                                                    barriers, &h, &r);
          return code(rc) + req(r, &h);
        });
  compare(cases);
}

TEST(NcclDifferential, ErrorStrings) {
  if (real().h == nullptr) GTEST_SKIP() << "NCCL not loadable here: " << real().error;
  for (int c : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 100}) {
    auto r = static_cast<ncclResult_t>(c);
    EXPECT_STREQ(SYM(ours(), ncclGetErrorString)(r), SYM(real(), ncclGetErrorString)(r)) << c;
  }
}

TEST(NcclDifferential, CallsThatNeedADeviceWithoutOne) {
  if (gpuUsable()) GTEST_SKIP() << "a GPU is usable here: these cases are for machines without one";
  ncclUniqueId id{};
  std::vector<std::pair<std::string, Case>> cases = {
      {"ncclCommInitRank",
       [id](const Lib& l) {
         ncclComm_t c = nullptr;
         return code(SYM(l, ncclCommInitRank)(&c, 2, id, 0));
       }},
      {"ncclCommInitRank, bad arguments",
       [id](const Lib& l) {
         ncclComm_t c = nullptr;
         return code(SYM(l, ncclCommInitRank)(nullptr, 0, id, 5)) + " " +
                code(SYM(l, ncclCommInitRank)(&c, 2, id, -1));
       }},
      {"ncclCommInitRankConfig",
       [id](const Lib& l) {
         ncclComm_t c = nullptr;
         ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
         ncclConfig_t bad{};
         return code(SYM(l, ncclCommInitRankConfig)(&c, 2, id, 0, &cfg)) + " " +
                code(SYM(l, ncclCommInitRankConfig)(&c, 2, id, 0, &bad));
       }},
      {"ncclCommInitRankScalable",
       [id](const Lib& l) {
         ncclComm_t c = nullptr;
         ncclUniqueId ids[1] = {id};
         return code(SYM(l, ncclCommInitRankScalable)(&c, 2, 0, 1, ids, nullptr));
       }},
      {"ncclCommInitAll",
       [](const Lib& l) {
         ncclComm_t cs[4];
         int devs[2] = {0, 0};
         return code(SYM(l, ncclCommInitAll)(cs, 2, nullptr)) + " " +
                code(SYM(l, ncclCommInitAll)(cs, 2, devs)) + " " +
                code(SYM(l, ncclCommInitAll)(nullptr, -1, nullptr));
       }},
      {"ncclCommSplit(NULL)",
       [](const Lib& l) {
         ncclComm_t c = nullptr;
         return code(SYM(l, ncclCommSplit)(nullptr, 0, 0, &c, nullptr));
       }},
      {"ncclMemAlloc",
       [](const Lib& l) {
         void* p = nullptr;
         return code(SYM(l, ncclMemAlloc)(&p, 1024)) + " " + code(SYM(l, ncclMemAlloc)(&p, 0));
       }},
      {"ncclMemFree(NULL)", [](const Lib& l) { return code(SYM(l, ncclMemFree)(nullptr)); }},
      {"ncclCommWindowRegister(NULL)",
       [](const Lib& l) {
         ncclWindow_t w;
         char b[8];
         return code(SYM(l, ncclCommWindowRegister)(nullptr, b, 8, &w, 0));
       }},
  };
  compare(cases);
}

TEST(NcclDifferential, LastErrorSaysWhy) {
  ASSERT_NE(ours().h, nullptr) << ours().error;
  int n;
  EXPECT_EQ(SYM(ours(), ncclCommCount)(nullptr, &n), ncclInvalidArgument);
  std::string why = SYM(ours(), ncclGetLastError)(nullptr);
  EXPECT_NE(why.find("comm argument is NULL"), std::string::npos) << why;
  // A success leaves the last error alone, as NCCL's does.
  int v;
  EXPECT_EQ(SYM(ours(), ncclGetVersion)(&v), ncclSuccess);
  EXPECT_EQ(why, SYM(ours(), ncclGetLastError)(nullptr));
  // Each call names itself, not a neighbour (ncclCommDeregister said
  // "ncclCommRegister").
  int dummy = 0;
  const std::vector<std::pair<std::string, std::function<ncclResult_t()>>> calls = {
      {"ncclCommRegister",
       [&] { return SYM(ours(), ncclCommRegister)(nullptr, &dummy, 4, nullptr); }},
      {"ncclCommDeregister", [&] { return SYM(ours(), ncclCommDeregister)(nullptr, &dummy); }},
      {"ncclCommWindowDeregister",
       [&] { return SYM(ours(), ncclCommWindowDeregister)(nullptr, nullptr); }},
  };
  for (const auto& [name, call] : calls) {
    EXPECT_EQ(call(), ncclInvalidArgument) << name;
    why = SYM(ours(), ncclGetLastError)(nullptr);
    EXPECT_EQ(why.rfind(name + " : ", 0), 0u) << why;
  }
  if (!gpuUsable()) {
    ncclComm_t c;
    ncclUniqueId id{};
    EXPECT_EQ(SYM(ours(), ncclCommInitRank)(&c, 2, id, 0), ncclUnhandledCudaError);
    why = SYM(ours(), ncclGetLastError)(nullptr);
    EXPECT_NE(why.find("Cuda failure"), std::string::npos) << why;
  }
}

}  // namespace
