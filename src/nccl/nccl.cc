// libchorus-nccl: the NCCL API, compiled against the nccl.h that NCCL ships
// (a signature or enum that differs from it is a compile error), served by
// Chorus's C API. Put it first on the library path (it is also installed as
// libnccl.so.2) and an unmodified NCCL program runs on Chorus: verified
// algorithm files from MSCCL_ALGO_DIR / CHORUS_ALGO_DIR, else built-ins by
// size. docs/nccl.md says what is served and what is not.
//
// Argument checks and their codes follow NCCL 2.28 (init.cc, enqueue.cc,
// group.cc, argcheck.cc): without a usable GPU every call that needs one
// fails with ncclUnhandledCudaError before it looks at its arguments, as
// NCCL's does; tests/nccl/nccl_differential_test.cc compares the two.
// CHORUS_NCCL_HOST=1 puts ranks on host threads instead (host buffers,
// streams unused): how CI runs NCCL programs without a GPU.
#include <cuda.h>  // types only: driver calls go through cudaGetDriverEntryPointByVersion
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "core/log.h"
#include "core/types.h"
#include "nccl/premul.h"
#include "nccl/shim.h"

extern char** environ;

static_assert(sizeof(ncclUniqueId) == sizeof(chorusUniqueId), "unique ids differ in size");
static_assert(static_cast<int>(ncclSum) == static_cast<int>(chorusSum) &&
                  static_cast<int>(ncclAvg) == static_cast<int>(chorusAvg) &&
                  static_cast<int>(ncclNumOps) == static_cast<int>(chorusNumOps),
              "reduction ops differ");
static_assert(static_cast<int>(ncclFloat8e5m2) == static_cast<int>(chorusFloat8e5m2) &&
                  static_cast<int>(ncclNumTypes) == static_cast<int>(chorusNumTypes),
              "data types differ");
static_assert(static_cast<int>(ncclInProgress) == static_cast<int>(chorusInProgress),
              "result codes differ");

// A user-created reduction (ncclRedOpCreatePreMulSum).
struct PreMulSum {
  ncclDataType_t type;
  bool onDevice;                // ncclScalarDevice: read when the collective runs
  const void* deviceScalar;     // onDevice
  unsigned char value[8] = {};  // ncclScalarHostImmediate: read at creation
};

// NCCL's opaque window (ncclCommWindowRegister), defined here.
struct ncclWindow_vidmem {
  void* buff = nullptr;
  size_t size = 0;
  int flags = 0;
};

// NCCL's opaque communicator, defined here.
struct ncclComm {
  chorusComm_t c = nullptr;  // null until a grouped init has run
  int nranks = 0;
  int rank = 0;
  int device = -1;  // -1: a rank on the host (CHORUS_NCCL_HOST=1)
  std::mutex mu;    // ops, finalized
  std::map<int, PreMulSum> ops;
  int nextOp = ncclNumOps;
  // ncclCommRegister's handles (a buffer and its size; not otherwise used).
  std::map<const void*, std::unique_ptr<std::pair<void*, size_t>>> registrations;
  std::map<const ncclWindow_vidmem*, std::unique_ptr<ncclWindow_vidmem>> windows;
  bool finalized = false;
  std::atomic<bool> revoked{false};
};

namespace {

using chorus::LogLevel;
using chorus::logLine;

// ---- settings, read once ----

struct Settings {
  bool host = false;        // CHORUS_NCCL_HOST=1
  bool warnErrors = false;  // NCCL_DEBUG is WARN or more: failed calls say why on stderr
};

std::string envText(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// The NCCL variables with a meaning here: NCCL_DEBUG sets Chorus's log level
// (unless CHORUS_DEBUG does), NCCL_SOCKET_IFNAME the interface unique ids
// listen on (unless CHORUS_SOCKET_IFNAME does). MSCCL_ALGO_DIR and
// MSCCL_XML_FILES are read by Chorus's selection itself.
constexpr const char* kHonoured[] = {"NCCL_DEBUG", "NCCL_SOCKET_IFNAME"};

Settings readSettings() {
  Settings s;
  s.host = envText("CHORUS_NCCL_HOST") == "1";
  std::string debug = envText("NCCL_DEBUG");
  std::transform(debug.begin(), debug.end(), debug.begin(), ::toupper);
  if (!debug.empty() && envText("CHORUS_DEBUG").empty()) {
    const char* level = debug == "INFO" || debug == "TRACE" ? "INFO"
                        : debug == "WARN"                   ? "WARN"
                                                            : "NONE";
    setenv("CHORUS_DEBUG", level, 0);
  }
  s.warnErrors = debug == "WARN" || debug == "INFO" || debug == "TRACE";
  std::string ifname = envText("NCCL_SOCKET_IFNAME");
  if (!ifname.empty()) setenv("CHORUS_SOCKET_IFNAME", ifname.c_str(), 0);
  if (!debug.empty())
    logLine(LogLevel::kInfo,
            "nccl: NCCL " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
                std::to_string(NCCL_PATCH) + " API served by Chorus " +
                std::to_string(CHORUS_MAJOR) + "." + std::to_string(CHORUS_MINOR) + "." +
                std::to_string(CHORUS_PATCH) + " (libchorus-nccl), " +
                (s.host ? "ranks on host threads (CHORUS_NCCL_HOST=1)" : "ranks on GPUs"));
  std::string ignored;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("NCCL_", 0) != 0) continue;
    std::string name = kv.substr(0, kv.find('='));
    if (std::find(std::begin(kHonoured), std::end(kHonoured), name) != std::end(kHonoured))
      continue;
    if (!ignored.empty()) ignored += ", ";
    ignored += name;
  }
  if (!ignored.empty())
    logLine(LogLevel::kInfo, "nccl: ignored (no meaning in Chorus): " + ignored);
  return s;
}

const Settings& settings() {
  static const Settings s = readSettings();
  return s;
}

// ---- errors: NCCL's last error is one string for the process ----

std::mutex lastMu;
std::string& lastText() {
  static auto* s = new std::string();
  return *s;
}

ncclResult_t fail(ncclResult_t code, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(lastMu);
    lastText() = why;
  }
  logLine(settings().warnErrors ? LogLevel::kWarn : LogLevel::kInfo, "nccl: " + why);
  return code;
}

// Chorus's codes are NCCL's, but for chorusTimeout (a peer that stopped
// answering: NCCL's "remote process exited").
ncclResult_t fromChorus(chorusResult_t r) {
  if (r == chorusSuccess) return ncclSuccess;
  ncclResult_t code = r == chorusTimeout  ? ncclRemoteError
                      : r < chorusTimeout ? static_cast<ncclResult_t>(r)
                                          : ncclInternalError;
  return fail(code, chorusGetLastError(nullptr));
}

// Every call that needs a GPU asks CUDA first, as NCCL does.
ncclResult_t currentDevice(int* dev) {
  *dev = -1;
  if (settings().host) return ncclSuccess;
  cudaError_t e = cudaGetDevice(dev);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky for the application's next call
    return fail(ncclUnhandledCudaError,
                std::string("Cuda failure '") + cudaGetErrorString(e) + "'");
  }
  return ncclSuccess;
}

using chorus::nccl_shim::guarded;

// ---- memory windows can be made on ----

// ncclMemAlloc's device allocations (address -> bytes).
std::mutex memMu;
std::map<uintptr_t, size_t>& memAllocs() {
  static auto* m = new std::map<uintptr_t, size_t>();
  return *m;
}

// Whether [p, p + size) is memory NCCL 2.28 makes windows on: ncclMemAlloc's,
// or any cuMem (VMM) allocation, which NCCL recognizes by
// cuMemRetainAllocationHandle (a cudaMalloc buffer fails there, so
// ncclCommWindowRegister returns ncclUnhandledCudaError on it).
bool windowable(const void* p, size_t size) {
  auto a = reinterpret_cast<uintptr_t>(p);
  {
    std::lock_guard<std::mutex> lock(memMu);
    auto it = memAllocs().upper_bound(a);
    if (it != memAllocs().begin()) {
      --it;
      uintptr_t off = a - it->first;  // it->first <= a
      if (off <= it->second && size <= it->second - off) return true;
    }
  }
  auto driver = [](const char* name) -> void* {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return fn;
  };
  using Retain = CUresult (*)(CUmemGenericAllocationHandle*, void*);
  using Release = CUresult (*)(CUmemGenericAllocationHandle);
  using Range = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  auto retain = reinterpret_cast<Retain>(driver("cuMemRetainAllocationHandle"));
  auto release = reinterpret_cast<Release>(driver("cuMemRelease"));
  auto range = reinterpret_cast<Range>(driver("cuMemGetAddressRange"));
  if (retain == nullptr || release == nullptr || range == nullptr) return false;
  CUmemGenericAllocationHandle h{};
  if (retain(&h, const_cast<void*>(p)) != CUDA_SUCCESS) return false;
  release(h);
  // The whole window inside the mapping that holds p.
  CUdeviceptr base = 0;
  size_t bytes = 0;
  if (range(&base, &bytes, static_cast<CUdeviceptr>(a)) != CUDA_SUCCESS) return false;
  uintptr_t off = a - static_cast<uintptr_t>(base);
  return off <= bytes && size <= bytes - off;
}

// ---- communicators: live handles are known, so a stale one is refused ----

std::mutex commsMu;
std::set<ncclComm*>& liveComms() {
  static auto* s = new std::set<ncclComm*>();
  return *s;
}

void addLive(ncclComm* c) {
  std::lock_guard<std::mutex> lock(commsMu);
  liveComms().insert(c);
}

std::string pointerText(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

ncclResult_t commCheck(ncclComm* comm, const char* fn) {
  NCCL_PTR_CHECK(comm, fn, "comm");
  std::lock_guard<std::mutex> lock(commsMu);
  if (liveComms().count(comm) == 0 || comm->c == nullptr)
    return fail(ncclInvalidArgument, std::string(fn) + " : communicator " + pointerText(comm) +
                                         " is not live (destroyed, or its init failed)");
  return ncclSuccess;
}

// A destroyed or aborted communicator leaves the live set but its few bytes
// are kept: another thread may still be inside a call on it (stopping such
// calls is what ncclCommAbort is for), and a later call with the handle is
// refused by commCheck instead of reading freed memory.
void release(ncclComm* c) {
  std::lock_guard<std::mutex> lock(commsMu);
  liveComms().erase(c);
}

void logInit(const ncclComm& c, const char* how) {
  if (!chorus::logEnabled(LogLevel::kInfo)) return;
  logLine(LogLevel::kInfo,
          std::string("nccl: ") + how + " comm " + pointerText(&c) + " rank " +
              std::to_string(c.rank) + " nranks " + std::to_string(c.nranks) +
              (c.device >= 0 ? " cudaDev " + std::to_string(c.device) : " on the host") +
              " - Init COMPLETE");
}

// ---- groups: NCCL's sit on the C API's (chorusGroupStart/End) ----

// What the C API's group does not see: the shim's own refusals (NCCL's
// argument checks), the temporaries of premulsum (freed once the group's
// calls are issued), and the inits to log or release at its end.
struct NcclGroup {
  int depth = 0;
  std::vector<ncclComm*> inits;
  std::vector<std::function<void()>> after;
  ncclResult_t firstError = ncclSuccess;
  std::string firstWhy;
};
thread_local NcclGroup group;

ncclResult_t keepInGroup(ncclResult_t r) {
  if (r != ncclSuccess && group.depth > 0 && group.firstError == ncclSuccess) {
    group.firstError = r;
    std::lock_guard<std::mutex> lock(lastMu);
    group.firstWhy = lastText();
  }
  return r;
}

// A communicator this thread's group is still making (ncclCommInitRank in
// the group): the group's collectives may use it; what ends or asks it waits
// for the group's end.
bool beingMade(const ncclComm* c) {
  return group.depth > 0 &&
         std::find(group.inits.begin(), group.inits.end(), c) != group.inits.end();
}
ncclResult_t madeCheck(ncclComm* comm, const char* fn) {
  if (!beingMade(comm)) return ncclSuccess;
  return fail(ncclInvalidUsage, std::string(fn) + " : communicator " + pointerText(comm) +
                                    " is made when its group ends (ncclGroupEnd); call this after");
}

// The outermost group's end: the C API's group runs its calls (and makes
// its communicators), or, when the shim refused a call while grouping, drops
// them (`run` false: a refusal, or ncclGroupSimulateEnd) and makes only the
// communicators, whose peers are meeting them.
ncclResult_t endGroup(NcclGroup g, bool run) {
  ncclResult_t r = ncclSuccess;
  if (run && g.firstError == ncclSuccess) {
    r = fromChorus(chorusGroupEnd());
  } else {
    r = fromChorus(chorusGroupCancel());
    if (run && g.firstError != ncclSuccess) r = fail(g.firstError, g.firstWhy);
  }
  for (auto& f : g.after) f();
  for (ncclComm* c : g.inits) {
    int n = 0;
    if (chorusCommCount(c->c, &n) == chorusSuccess) {
      logInit(*c, "grouped init:");
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(commsMu);
      c->c = nullptr;
    }
    release(c);
  }
  return r;
}

// Issues `op`: now, or, inside a group, into the C API's group; `after`
// frees its temporaries once it is issued.
ncclResult_t issue(const std::function<chorusResult_t()>& op, std::function<void()> after = {}) {
  ncclResult_t r = fromChorus(op());
  if (!after) return r;
  if (group.depth > 0)
    group.after.push_back(std::move(after));
  else
    after();
  return r;
}

// ---- argument checks of collectives (NCCL's ArgsCheck) ----

enum class Need { kNone, kOp };

ncclResult_t argsCheck(const char* fn, ncclComm* comm, ncclDataType_t type, ncclRedOp_t op,
                       Need need, int root, bool rooted, const PreMulSum** user) {
  if (ncclResult_t r = commCheck(comm, fn); r != ncclSuccess) return r;
  if (comm->revoked.load())
    return fail(ncclInvalidUsage, std::string(fn) + ": communicator was revoked");
  if (rooted && (root < 0 || root >= comm->nranks))
    return fail(ncclInvalidArgument, std::string(fn) + " : invalid root " + std::to_string(root) +
                                         " (root should be in the 0.." +
                                         std::to_string(comm->nranks - 1) + " range)");
  if (type < 0 || type >= ncclNumTypes)
    return fail(ncclInvalidArgument,
                std::string(fn) + " : invalid type " + std::to_string(static_cast<int>(type)));
  if (need == Need::kOp) {
    if (op < 0 || op > ncclMaxRedOp)
      return fail(ncclInvalidArgument, std::string(fn) + " : invalid reduction operation " +
                                           std::to_string(static_cast<int>(op)));
    if (op >= ncclNumOps) {
      std::lock_guard<std::mutex> lock(comm->mu);
      auto it = comm->ops.find(static_cast<int>(op));
      if (it == comm->ops.end())
        return fail(ncclInvalidArgument, std::string(fn) + " : user-defined reduction operation " +
                                             std::to_string(static_cast<int>(op)) +
                                             " is unknown to this communicator");
      if (it->second.type != type)
        return fail(ncclInvalidArgument, std::string(fn) + " : user-defined reduction operation " +
                                             std::to_string(static_cast<int>(op)) +
                                             " was made for data type " +
                                             std::to_string(static_cast<int>(it->second.type)) +
                                             ", not " + std::to_string(static_cast<int>(type)));
      *user = &it->second;
    }
  }
  return ncclSuccess;
}

chorusDataType_t toChorus(ncclDataType_t t) { return static_cast<chorusDataType_t>(t); }
// Chorus's own enum orders types differently from NCCL's (and chorus.h's).
chorus::DataType coreType(ncclDataType_t t) {
  return *chorus::dataTypeFromAbi(static_cast<int>(t));  // the caller checked the range
}

// A reduction with a PreMulSum op: each rank's input scaled into a temporary
// (on the stream, before the collective), then a sum from the temporary.
// `issueSum(scaled)` issues the collective with the temporary as input.
ncclResult_t preMulSum(const char* fn, ncclComm* comm, const PreMulSum& pm, const void* send,
                       size_t elements, ncclDataType_t type, cudaStream_t stream,
                       std::function<chorusResult_t(const void*)> issueSum) {
  const size_t bytes = elements * chorus::dataTypeSize(coreType(type));
  if (comm->device < 0) {
    auto scaled = std::make_shared<std::vector<unsigned char>>(std::max<size_t>(bytes, 1));
    chorus::nccl::scaleOnHost(coreType(type), scaled->data(), send, elements,
                              pm.onDevice ? pm.deviceScalar : pm.value);
    return issue([issueSum, scaled] { return issueSum(scaled->data()); }, [scaled] {});
  }
  // The communicator's GPU, not whichever is current (one thread may drive
  // every rank of ncclCommInitAll without cudaSetDevice).
  int saved = 0;
  if (cudaError_t e = cudaGetDevice(&saved); e != cudaSuccess)
    return fail(ncclUnhandledCudaError, std::string(fn) + ": " + cudaGetErrorString(e));
  struct Restore {
    int d;
    ~Restore() { cudaSetDevice(d); }
  } restore{saved};
  if (cudaError_t e = cudaSetDevice(comm->device); e != cudaSuccess)
    return fail(ncclUnhandledCudaError, std::string(fn) + ": " + cudaGetErrorString(e));
  void* tmp = nullptr;
  if (cudaError_t e = cudaMallocAsync(&tmp, std::max<size_t>(bytes, 1), stream); e != cudaSuccess)
    return fail(ncclUnhandledCudaError,
                std::string(fn) + ": premulsum temporary: " + cudaGetErrorString(e));
  chorus::Status st = chorus::nccl::scaleOnDevice(coreType(type), tmp, send, elements, pm.value,
                                                  pm.onDevice ? pm.deviceScalar : nullptr, stream);
  if (!st.isOk()) {
    cudaFreeAsync(tmp, stream);
    return fail(ncclUnhandledCudaError, std::string(fn) + ": " + st.message());
  }
  const int device = comm->device;
  return issue([issueSum, tmp] { return issueSum(tmp); },
               [tmp, stream, device] {
                 int cur = 0;
                 cudaGetDevice(&cur);
                 cudaSetDevice(device);
                 cudaFreeAsync(tmp, stream);
                 cudaSetDevice(cur);
               });
}

// One collective (or send, receive): NCCL's argument checks, the no-op of
// a count of 0, premulsum's scaling, then `call` now or at the group's end.
struct CallSpec {
  const char* name;  // NCCL's spelling in messages: "AllReduce"
  ncclComm_t comm;
  ncclDataType_t type;
  ncclRedOp_t op;
  Need need;
  bool rooted;  // `root` is a root or a peer, checked
  int root;
  size_t count;  // 0: nothing to do
  size_t input;  // elements of this rank's input (what premulsum scales)...
  bool perRank;  // ...times the number of ranks (reduce-scatter)
  const void* send;
  cudaStream_t stream;
};
using ChorusCall =
    std::function<chorusResult_t(const void* in, chorusRedOp_t op, chorusComm_t c, void* stream)>;

ncclResult_t collective(const CallSpec& k, ChorusCall call) {
  return keepInGroup(guarded(k.name, [&]() -> ncclResult_t {
    const PreMulSum* pm = nullptr;
    if (ncclResult_t r = argsCheck(k.name, k.comm, k.type, k.op, k.need, k.root, k.rooted, &pm);
        r != ncclSuccess)
      return r;
    if (k.count == 0) return ncclSuccess;
    chorusComm_t c = k.comm->c;
    void* s = k.comm->device >= 0 ? k.stream : nullptr;
    if (pm != nullptr)
      return preMulSum(k.name, k.comm, *pm, k.send,
                       k.input * (k.perRank ? static_cast<size_t>(k.comm->nranks) : 1), k.type,
                       k.stream, [=](const void* in) { return call(in, chorusSum, c, s); });
    const void* in = k.send;
    auto o = static_cast<chorusRedOp_t>(k.op);
    return issue([=] { return call(in, o, c, s); });
  }));
}

// ---- inits ----

ncclResult_t checkConfig(const ncclConfig_t* config) {
  if (config == nullptr) return ncclSuccess;
  if (config->magic != 0xcafebeef)
    return fail(ncclInvalidArgument,
                "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
  if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1)
    return fail(ncclInvalidArgument,
                "Invalid config blocking attribute value " + std::to_string(config->blocking));
  // Non-blocking communicators are served blocking: every call returns
  // ncclSuccess when done, which NCCL allows them to (never ncclInProgress).
  return ncclSuccess;
}

ncclResult_t initRank(const char* fn, ncclComm_t* newcomm, int nranks, const ncclUniqueId& id,
                      int rank, const ncclConfig_t* config) {
  int dev = -1;
  if (ncclResult_t r = currentDevice(&dev); r != ncclSuccess) return r;
  NCCL_PTR_CHECK(newcomm, fn, "newcomm");
  *newcomm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument,
                "Invalid rank requested : " + std::to_string(rank) + "/" + std::to_string(nranks));
  if (ncclResult_t r = checkConfig(config); r != ncclSuccess) return r;
  auto* c = new ncclComm();
  c->nranks = nranks;
  c->rank = rank;
  c->device = dev;
  chorusUniqueId cid;
  std::memcpy(cid.internal, id.internal, sizeof(cid.internal));
  auto make = [cid, nranks, rank, dev](chorusComm_t* out) {
    return chorusCommInitRankDevice(out, nranks, cid, rank, dev);
  };
  addLive(c);
  *newcomm = c;
  // Inside a group, the C API gives the handle now and makes the
  // communicator at the group's end (ranks driven from one thread).
  if (group.depth > 0) {
    ncclResult_t r = fromChorus(make(&c->c));
    if (r == ncclSuccess) {
      group.inits.push_back(c);
    } else {
      *newcomm = nullptr;
      release(c);
    }
    return r;
  }
  if (ncclResult_t r = fromChorus(make(&c->c)); r != ncclSuccess) {
    *newcomm = nullptr;
    release(c);
    return r;
  }
  logInit(*c, "init:");
  return ncclSuccess;
}

// Wraps Chorus communicators made together (InitAll, Split) in handles.
ncclComm* wrap(chorusComm_t cc, int device) {
  auto* c = new ncclComm();
  c->c = cc;
  chorusCommCount(cc, &c->nranks);
  chorusCommUserRank(cc, &c->rank);
  c->device = device;
  addLive(c);
  return c;
}

// NCCL_DEBUG / CHORUS_DEBUG, read again.
void resetDebugLevel() {
  std::string debug = envText("CHORUS_DEBUG");
  if (debug.empty()) debug = envText("NCCL_DEBUG");
  std::transform(debug.begin(), debug.end(), debug.begin(), ::toupper);
  chorus::setLogLevel(debug == "INFO" || debug == "TRACE"     ? LogLevel::kInfo
                      : debug == "NONE" || debug == "VERSION" ? LogLevel::kNone
                                                              : LogLevel::kWarn);
}

}  // namespace

namespace chorus::nccl_shim {

ncclResult_t fail(ncclResult_t code, const std::string& why) { return ::fail(code, why); }

ncclResult_t rankAndSize(ncclComm_t comm, const char* fn, int* rank, int* size) {
  if (ncclResult_t r = commCheck(comm, fn); r != ncclSuccess) return r;
  *rank = comm->rank;
  *size = comm->nranks;
  return ncclSuccess;
}

}  // namespace chorus::nccl_shim

// ---- the API ----

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;  // NCCL says nothing here either
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t code) {
  switch (code) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t) {
  thread_local std::string copy;
  std::lock_guard<std::mutex> lock(lastMu);
  copy = lastText();
  return copy.c_str();
}

void ncclResetDebugInit() { resetDebugLevel(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  return guarded("ncclGetUniqueId", [&] {
    settings();
    NCCL_PTR_CHECK(uniqueId, "GetUniqueId", "out");
    return fromChorus(chorusGetUniqueId(reinterpret_cast<chorusUniqueId*>(uniqueId)));
  });
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return guarded("ncclCommInitRank",
                 [&] { return initRank("CommInitRank", comm, nranks, commId, rank, nullptr); });
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return guarded("ncclCommInitRankConfig", [&] {
    return initRank("CommInitRankConfig", comm, nranks, commId, rank, config);
  });
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  return guarded("ncclCommInitRankScalable", [&]() -> ncclResult_t {
    int dev = -1;
    if (ncclResult_t r = currentDevice(&dev); r != ncclSuccess) return r;
    if (nId <= 0 || nId > nranks)
      return fail(ncclInvalidArgument,
                  "improper usage of ncclCommInitRank: nId = " + std::to_string(nId) +
                      ", nranks=" + std::to_string(nranks));
    NCCL_PTR_CHECK(commIds, "CommInitRankScalable", "commIds");
    // Every rank holds every id in the same order: the first one's root
    // serves them all.
    return initRank("CommInitRankScalable", newcomm, nranks, commIds[0], myrank, config);
  });
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guarded("ncclCommInitAll", [&]() -> ncclResult_t {
    int dev = -1;
    if (ncclResult_t r = currentDevice(&dev); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(comms, "CommInitAll", "comms");
    if (ndev < 0)
      return fail(ncclInvalidArgument, "Invalid device count requested : " + std::to_string(ndev));
    if (ndev == 0) return ncclSuccess;
    std::vector<int> devices;
    if (!settings().host) {
      int total = 0;
      if (cudaError_t e = cudaGetDeviceCount(&total); e != cudaSuccess)
        return fail(ncclUnhandledCudaError,
                    std::string("Cuda failure '") + cudaGetErrorString(e) + "'");
      for (int r = 0; r < ndev; ++r) {
        // NULL: the first ndev GPUs; with fewer GPUs than ranks, ranks share
        // them round-robin (NCCL would fail here).
        int d = devlist != nullptr ? devlist[r] : r % total;
        if (d < 0 || d >= total)
          return fail(ncclInvalidArgument, "Invalid device " + std::to_string(d) +
                                               " (totalnDev=" + std::to_string(total) + ")");
        devices.push_back(d);
      }
    }
    std::vector<chorusComm_t> cs(static_cast<size_t>(ndev));
    chorusResult_t r =
        chorusCommInitAll(cs.data(), ndev, settings().host ? nullptr : devices.data());
    if (r != chorusSuccess) return fromChorus(r);
    for (int i = 0; i < ndev; ++i) {
      comms[i] =
          wrap(cs[static_cast<size_t>(i)], settings().host ? -1 : devices[static_cast<size_t>(i)]);
      logInit(*comms[i], "init all:");
    }
    return ncclSuccess;
  });
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  return guarded("ncclCommSplit", [&]() -> ncclResult_t {
    int dev = -1;
    if (ncclResult_t r = currentDevice(&dev); r != ncclSuccess) return r;
    if (ncclResult_t r = commCheck(comm, "CommSplit"); r != ncclSuccess) return r;
    if (ncclResult_t r = madeCheck(comm, "CommSplit"); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(newcomm, "CommSplit", "newcomm");
    *newcomm = nullptr;
    if (ncclResult_t r = checkConfig(config); r != ncclSuccess) return r;
    if (group.depth > 0)
      return fail(ncclInvalidUsage,
                  "ncclCommSplit inside a group is not supported by Chorus yet; call it outside");
    chorusComm_t out = nullptr;
    if (ncclResult_t r = fromChorus(chorusCommSplit(comm->c, color, key, &out)); r != ncclSuccess)
      return r;
    if (out != nullptr) {
      *newcomm = wrap(out, comm->device);
      logInit(**newcomm, "split:");
    }
    return ncclSuccess;
  });
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return guarded("ncclCommShrink", [&]() -> ncclResult_t {
    int dev = -1;
    if (ncclResult_t r = currentDevice(&dev); r != ncclSuccess) return r;
    if (ncclResult_t r = commCheck(comm, "CommShrink"); r != ncclSuccess) return r;
    if (ncclResult_t r = madeCheck(comm, "CommShrink"); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(newcomm, "CommShrink", "newcomm");
    *newcomm = nullptr;
    NCCL_PTR_CHECK(excludeRanksList, "CommShrink", "excludeRanksList");
    if (excludeRanksCount <= 0)
      return fail(ncclInvalidArgument, "CommShrink : excludeRanksCount " +
                                           std::to_string(excludeRanksCount) + " must be positive");
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
      return fail(ncclInvalidArgument,
                  "CommShrink : unknown shrinkFlags " + std::to_string(shrinkFlags));
    if (ncclResult_t r = checkConfig(config); r != ncclSuccess) return r;
    if (group.depth > 0)
      return fail(ncclInvalidUsage,
                  "ncclCommShrink inside a group is not supported by Chorus yet; call it outside");
    chorusComm_t out = nullptr;
    if (ncclResult_t r = fromChorus(chorusCommShrink(comm->c, excludeRanksList, excludeRanksCount,
                                                     shrinkFlags == NCCL_SHRINK_ABORT, &out));
        r != ncclSuccess)
      return r;
    *newcomm = wrap(out, comm->device);
    logInit(**newcomm, "shrink:");
    return ncclSuccess;
  });
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return guarded("ncclCommRevoke", [&]() -> ncclResult_t {
    if (comm == nullptr) return ncclSuccess;
    if (ncclResult_t r = commCheck(comm, "CommRevoke"); r != ncclSuccess) return r;
    if (ncclResult_t r = madeCheck(comm, "CommRevoke"); r != ncclSuccess) return r;
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
      return fail(ncclInvalidArgument, "ncclCommRevoke: revokeFlags must be 0");
    if (comm->revoked.exchange(true))
      return fail(ncclInvalidArgument, "ncclCommRevoke: communicator is revoked already");
    // In-flight calls end now (the abort is synchronous), so the
    // communicator is quiescent when this returns: never ncclInProgress.
    return fromChorus(chorusCommRevoke(comm->c));
  });
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return guarded("ncclCommFinalize", [&]() -> ncclResult_t {
    if (comm == nullptr) return ncclSuccess;
    if (ncclResult_t r = commCheck(comm, "CommFinalize"); r != ncclSuccess) return r;
    if (ncclResult_t r = madeCheck(comm, "CommFinalize"); r != ncclSuccess) return r;
    if (comm->revoked.load())
      return fail(ncclInvalidUsage, "ncclCommFinalize: communicator was revoked (destroy it)");
    {
      std::lock_guard<std::mutex> lock(comm->mu);
      if (comm->finalized)
        return fail(ncclInvalidArgument, "ncclCommFinalize: communicator is finalized already");
      comm->finalized = true;
    }
    return fromChorus(chorusCommFinalize(comm->c));
  });
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return guarded("ncclCommDestroy", [&]() -> ncclResult_t {
    if (comm == nullptr) return ncclSuccess;
    if (ncclResult_t r = commCheck(comm, "CommDestroy"); r != ncclSuccess) return r;
    if (ncclResult_t r = madeCheck(comm, "CommDestroy"); r != ncclSuccess) return r;
    bool finalized;
    {
      std::lock_guard<std::mutex> lock(comm->mu);
      finalized = comm->finalized || comm->revoked.load();  // revoked: nothing left to flush
    }
    // As NCCL's: the rank's enqueued work finishes first.
    ncclResult_t flushed = finalized ? ncclSuccess : fromChorus(chorusCommFinalize(comm->c));
    ncclResult_t r = fromChorus(chorusCommDestroy(comm->c));
    release(comm);
    return flushed != ncclSuccess ? flushed : r;
  });
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return guarded("ncclCommAbort", [&]() -> ncclResult_t {
    if (comm == nullptr) return ncclSuccess;
    if (ncclResult_t r = commCheck(comm, "CommAbort"); r != ncclSuccess) return r;
    if (ncclResult_t r = madeCheck(comm, "CommAbort"); r != ncclSuccess) return r;
    ncclResult_t r = fromChorus(chorusCommAbort(comm->c));
    release(comm);
    return r;
  });
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return guarded("ncclCommGetAsyncError", [&]() -> ncclResult_t {
    if (ncclResult_t r = commCheck(comm, "ncclGetAsyncError"); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(asyncError, "ncclGetAsyncError", "asyncError");
    if (beingMade(comm)) {  // its init runs at the group's end
      *asyncError = ncclInProgress;
      return ncclSuccess;
    }
    chorusResult_t e = chorusSuccess;
    if (ncclResult_t r = fromChorus(chorusCommGetAsyncError(comm->c, &e)); r != ncclSuccess)
      return r;
    if (comm->revoked.load()) e = chorusSuccess;  // quiescent: the revocation is not an error
    *asyncError = e == chorusTimeout ? ncclRemoteError : static_cast<ncclResult_t>(e);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return guarded("ncclCommCount", [&]() -> ncclResult_t {
    if (ncclResult_t r = commCheck(comm, "CommCount"); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(count, "CommCount", "count");
    *count = comm->nranks;
    return ncclSuccess;
  });
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return guarded("ncclCommCuDevice", [&]() -> ncclResult_t {
    if (ncclResult_t r = commCheck(comm, "CommCuDevice"); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(device, "CommCuDevice", "device");
    *device = comm->device;  // -1 (cudaCpuDeviceId) for host ranks
    return ncclSuccess;
  });
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return guarded("ncclCommUserRank", [&]() -> ncclResult_t {
    if (ncclResult_t r = commCheck(comm, "CommUserRank"); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(rank, "CommUserRank", "rank");
    *rank = comm->rank;
    return ncclSuccess;
  });
}

// Registration is a hint: Chorus moves data through its own slots, so a
// registered buffer is served as any other. The handle is real (checked on
// deregistration).
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("ncclCommRegister", [&]() -> ncclResult_t {
    if (ncclResult_t r = commCheck(comm, "ncclCommRegister"); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(handle, "ncclCommRegister", "handle");
    static std::once_flag once;
    std::call_once(once, [] {
      logLine(LogLevel::kInfo,
              "nccl: buffer registration accepted; Chorus copies through its own slots and does "
              "not use it");
    });
    auto reg = std::make_unique<std::pair<void*, size_t>>(buff, size);
    std::lock_guard<std::mutex> lock(comm->mu);
    *handle = reg.get();
    comm->registrations[reg.get()] = std::move(reg);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guarded("ncclCommDeregister", [&]() -> ncclResult_t {
    if (ncclResult_t r = commCheck(comm, "ncclCommDeregister"); r != ncclSuccess) return r;
    if (handle == nullptr) return ncclSuccess;
    std::lock_guard<std::mutex> lock(comm->mu);
    if (comm->registrations.erase(handle) == 0)
      return fail(ncclInvalidArgument,
                  "ncclCommDeregister : handle is not a registration of this communicator");
    return ncclSuccess;
  });
}

// A window is a hint too: Chorus has no symmetric-memory kernels, so calls
// on a registered buffer run as on any other. The handle is real (checked
// when deregistered). NCCL's device API (nccl_device.h), which would read
// a window on the GPU, is not part of this library.
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  return guarded("ncclCommWindowRegister", [&]() -> ncclResult_t {
    int dev = -1;
    if (ncclResult_t r = currentDevice(&dev); r != ncclSuccess) return r;
    if (ncclResult_t r = commCheck(comm, "ncclCommWindowRegister"); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(win, "ncclCommWindowRegister", "win");
    *win = nullptr;
    if (buff == nullptr || size == 0) return ncclSuccess;  // as NCCL: nothing to register
    if (!settings().host && !windowable(buff, size))
      return fail(ncclUnhandledCudaError,
                  "ncclCommWindowRegister: " + pointerText(buff) + " (" + std::to_string(size) +
                      " bytes) is not memory from ncclMemAlloc or cuMem: NCCL 2.28 makes "
                      "windows only on cuMem allocations and fails the same way on cudaMalloc "
                      "memory");
    auto w = std::make_unique<ncclWindow_vidmem>();
    w->buff = buff;
    w->size = size;
    w->flags = winFlags;
    std::lock_guard<std::mutex> lock(comm->mu);
    *win = w.get();
    comm->windows[w.get()] = std::move(w);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return guarded("ncclCommWindowDeregister", [&]() -> ncclResult_t {
    if (ncclResult_t r = commCheck(comm, "ncclCommWindowDeregister"); r != ncclSuccess) return r;
    if (win == nullptr) return ncclSuccess;
    std::lock_guard<std::mutex> lock(comm->mu);
    if (comm->windows.erase(win) == 0)
      return fail(ncclInvalidArgument,
                  "ncclCommWindowDeregister : window is not one of this communicator");
    return ncclSuccess;
  });
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return guarded("ncclMemAlloc", [&]() -> ncclResult_t {
    int dev = -1;
    if (ncclResult_t r = currentDevice(&dev); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(ptr, "ncclMemAlloc", "ptr");
    if (settings().host) {  // host ranks take host memory
      *ptr = std::malloc(std::max<size_t>(size, 1));
      return *ptr != nullptr ? ncclSuccess : fail(ncclSystemError, "ncclMemAlloc: out of memory");
    }
    if (cudaError_t e = cudaMalloc(ptr, size); e != cudaSuccess)
      return fail(ncclUnhandledCudaError,
                  std::string("ncclMemAlloc: Cuda failure '") + cudaGetErrorString(e) + "'");
    try {
      std::lock_guard<std::mutex> lock(memMu);
      memAllocs()[reinterpret_cast<uintptr_t>(*ptr)] = size;
    } catch (...) {
      cudaFree(*ptr);
      *ptr = nullptr;
      throw;
    }
    return ncclSuccess;
  });
}

ncclResult_t ncclMemFree(void* ptr) {
  return guarded("ncclMemFree", [&]() -> ncclResult_t {
    int dev = -1;
    if (ncclResult_t r = currentDevice(&dev); r != ncclSuccess) return r;
    if (settings().host) {
      std::free(ptr);
      return ncclSuccess;
    }
    {
      std::lock_guard<std::mutex> lock(memMu);
      memAllocs().erase(reinterpret_cast<uintptr_t>(ptr));
    }
    if (cudaError_t e = cudaFree(ptr); e != cudaSuccess)
      return fail(ncclUnhandledCudaError,
                  std::string("ncclMemFree: Cuda failure '") + cudaGetErrorString(e) + "'");
    return ncclSuccess;
  });
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  return guarded("ncclRedOpCreatePreMulSum", [&]() -> ncclResult_t {
    if (ncclResult_t r = commCheck(comm, "ncclRedOpCreatePreMulSum"); r != ncclSuccess) return r;
    NCCL_PTR_CHECK(op, "ncclRedOpCreatePreMulSum", "op");
    NCCL_PTR_CHECK(scalar, "ncclRedOpCreatePreMulSum", "scalar");
    if (datatype < 0 || datatype >= ncclNumTypes)
      return fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum : invalid type " +
                                           std::to_string(static_cast<int>(datatype)));
    PreMulSum pm{datatype, residence == ncclScalarDevice, nullptr};
    if (pm.onDevice)
      pm.deviceScalar = scalar;
    else
      std::memcpy(pm.value, scalar, chorus::dataTypeSize(coreType(datatype)));
    std::lock_guard<std::mutex> lock(comm->mu);
    int id = comm->nextOp++;
    comm->ops[id] = pm;
    *op = static_cast<ncclRedOp_t>(id);
    return ncclSuccess;
  });
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return guarded("ncclRedOpDestroy", [&]() -> ncclResult_t {
    if (op >= 0 && op < ncclNumOps)
      return fail(ncclInvalidArgument, "ncclRedOpDestroy : operator is a NCCL builtin.");
    if (op < 0) return fail(ncclInvalidArgument, "ncclRedOpDestroy : operator is garbage.");
    if (comm == nullptr)
      return fail(ncclInvalidArgument, "ncclRedOpDestroy : invalid communicator passed.");
    if (ncclResult_t r = commCheck(comm, "ncclRedOpDestroy"); r != ncclSuccess) return r;
    std::lock_guard<std::mutex> lock(comm->mu);
    if (comm->ops.erase(static_cast<int>(op)) == 0)
      return fail(ncclInvalidArgument,
                  "ncclRedOpDestroy : operator is unknown to this communicator (or destroyed)");
    return ncclSuccess;
  });
}

// ---- collectives ----

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(
      {"AllReduce", comm, datatype, op, Need::kOp, false, 0, count, count, false, sendbuff, stream},
      [=](const void* in, chorusRedOp_t o, chorusComm_t c, void* s) {
        return chorusAllReduce(in, recvbuff, count, toChorus(datatype), o, c, s);
      });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective(
      {"Reduce", comm, datatype, op, Need::kOp, true, root, count, count, false, sendbuff, stream},
      [=](const void* in, chorusRedOp_t o, chorusComm_t c, void* s) {
        return chorusReduce(in, recvbuff, count, toChorus(datatype), o, root, c, s);
      });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  // The input (what premulsum scales) is every rank's share.
  return collective({"ReduceScatter", comm, datatype, op, Need::kOp, false, 0, recvcount, recvcount,
                     true, sendbuff, stream},
                    [=](const void* in, chorusRedOp_t o, chorusComm_t c, void* s) {
                      return chorusReduceScatter(in, recvbuff, recvcount, toChorus(datatype), o, c,
                                                 s);
                    });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective({"Broadcast", comm, datatype, ncclSum, Need::kNone, true, root, count, count,
                     false, sendbuff, stream},
                    [=](const void* in, chorusRedOp_t, chorusComm_t c, void* s) {
                      return chorusBroadcast(in, recvbuff, count, toChorus(datatype), root, c, s);
                    });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collective({"AllGather", comm, datatype, ncclSum, Need::kNone, false, 0, sendcount,
                     sendcount, false, sendbuff, stream},
                    [=](const void* in, chorusRedOp_t, chorusComm_t c, void* s) {
                      return chorusAllGather(in, recvbuff, sendcount, toChorus(datatype), c, s);
                    });
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collective({"AlltoAll", comm, datatype, ncclSum, Need::kNone, false, 0, count, count,
                     false, sendbuff, stream},
                    [=](const void* in, chorusRedOp_t, chorusComm_t c, void* s) {
                      return chorusAllToAll(in, recvbuff, count, toChorus(datatype), c, s);
                    });
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return collective({"Gather", comm, datatype, ncclSum, Need::kNone, true, root, count, count,
                     false, sendbuff, stream},
                    [=](const void* in, chorusRedOp_t, chorusComm_t c, void* s) {
                      return chorusGather(in, recvbuff, count, toChorus(datatype), root, c, s);
                    });
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective({"Scatter", comm, datatype, ncclSum, Need::kNone, true, root, count, count,
                     false, sendbuff, stream},
                    [=](const void* in, chorusRedOp_t, chorusComm_t c, void* s) {
                      return chorusScatter(in, recvbuff, count, toChorus(datatype), root, c, s);
                    });
}

// Sends and receives of no elements still pair up, as NCCL's do: they are
// issued with `count` standing in as 1 for the no-op test.
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return collective(
      {"Send", comm, datatype, ncclSum, Need::kNone, true, peer, 1, count, false, sendbuff, stream},
      [=](const void* in, chorusRedOp_t, chorusComm_t c, void* s) {
        return chorusSend(in, count, toChorus(datatype), peer, c, s);
      });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return collective(
      {"Recv", comm, datatype, ncclSum, Need::kNone, true, peer, 1, count, false, nullptr, stream},
      [=](const void*, chorusRedOp_t, chorusComm_t c, void* s) {
        return chorusRecv(recvbuff, count, toChorus(datatype), peer, c, s);
      });
}

// ---- groups ----

ncclResult_t ncclGroupStart() {
  return guarded("ncclGroupStart", [&]() -> ncclResult_t {
    if (ncclResult_t r = fromChorus(chorusGroupStart()); r != ncclSuccess) return r;
    ++group.depth;
    return ncclSuccess;
  });
}

ncclResult_t ncclGroupEnd() {
  return guarded("ncclGroupEnd", [&]() -> ncclResult_t {
    if (group.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: not in a group call.");
    if (--group.depth > 0) return fromChorus(chorusGroupEnd());
    return endGroup(std::exchange(group, NcclGroup()), /*run=*/true);
  });
}

// Chorus predicts times with its simulator on a topology (`chorus sim`), not
// here: the group's calls are dropped unrun, as a simulated end does, and
// the estimate is NCCL_UNDEF_FLOAT (unknown).
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return guarded("ncclGroupSimulateEnd", [&]() -> ncclResult_t {
    if (group.depth == 0)
      return fail(ncclInvalidUsage, "ncclGroupSimulateEnd: not in a group call.");
    if (simInfo != nullptr && simInfo->magic != 0x74685283)
      return fail(ncclInvalidArgument,
                  "ncclSimInfo_t argument not initialized via NCCL_SIM_INFO_INITIALIZER");
    if (--group.depth > 0) return fromChorus(chorusGroupCancel());
    if (simInfo != nullptr) simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
    return endGroup(std::exchange(group, NcclGroup()), /*run=*/false);
  });
}

// NCCL exports this beside ncclResetDebugInit (nccl.h declares only the
// latter).
void ncclResetDebugInitInternal();
void ncclResetDebugInitInternal() { resetDebugLevel(); }

// ---- the profiling names (pncclX), as NCCL exports them ----

#define CHORUS_PNCCL(ret, name, params) ret p##name params __attribute__((alias(#name)));
CHORUS_PNCCL(ncclResult_t, ncclMemAlloc, (void**, size_t))
CHORUS_PNCCL(ncclResult_t, ncclMemFree, (void*))
CHORUS_PNCCL(ncclResult_t, ncclGetVersion, (int*))
CHORUS_PNCCL(ncclResult_t, ncclGetUniqueId, (ncclUniqueId*))
CHORUS_PNCCL(ncclResult_t, ncclCommInitRankConfig,
             (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*))
CHORUS_PNCCL(ncclResult_t, ncclCommInitRank, (ncclComm_t*, int, ncclUniqueId, int))
CHORUS_PNCCL(ncclResult_t, ncclCommInitAll, (ncclComm_t*, int, const int*))
CHORUS_PNCCL(ncclResult_t, ncclCommFinalize, (ncclComm_t))
CHORUS_PNCCL(ncclResult_t, ncclCommDestroy, (ncclComm_t))
CHORUS_PNCCL(ncclResult_t, ncclCommAbort, (ncclComm_t))
CHORUS_PNCCL(ncclResult_t, ncclCommRevoke, (ncclComm_t, int))
CHORUS_PNCCL(ncclResult_t, ncclCommSplit, (ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*))
CHORUS_PNCCL(ncclResult_t, ncclCommShrink, (ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int))
CHORUS_PNCCL(ncclResult_t, ncclCommInitRankScalable,
             (ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*))
CHORUS_PNCCL(const char*, ncclGetErrorString, (ncclResult_t))
CHORUS_PNCCL(const char*, ncclGetLastError, (ncclComm_t))
CHORUS_PNCCL(void, ncclResetDebugInit, ())
CHORUS_PNCCL(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t, ncclResult_t*))
CHORUS_PNCCL(ncclResult_t, ncclCommCount, (const ncclComm_t, int*))
CHORUS_PNCCL(ncclResult_t, ncclCommCuDevice, (const ncclComm_t, int*))
CHORUS_PNCCL(ncclResult_t, ncclCommUserRank, (const ncclComm_t, int*))
CHORUS_PNCCL(ncclResult_t, ncclCommRegister, (const ncclComm_t, void*, size_t, void**))
CHORUS_PNCCL(ncclResult_t, ncclCommDeregister, (const ncclComm_t, void*))
CHORUS_PNCCL(ncclResult_t, ncclCommWindowRegister, (ncclComm_t, void*, size_t, ncclWindow_t*, int))
CHORUS_PNCCL(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t, ncclWindow_t))
CHORUS_PNCCL(ncclResult_t, ncclRedOpCreatePreMulSum,
             (ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t))
CHORUS_PNCCL(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t, ncclComm_t))
CHORUS_PNCCL(ncclResult_t, ncclReduce,
             (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
              cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclBcast,
             (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclBroadcast,
             (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclAllReduce,
             (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclReduceScatter,
             (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclAllGather,
             (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclAlltoAll,
             (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclGather,
             (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclScatter,
             (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclSend,
             (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclRecv, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
CHORUS_PNCCL(ncclResult_t, ncclGroupStart, ())
CHORUS_PNCCL(ncclResult_t, ncclGroupEnd, ())
CHORUS_PNCCL(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t*))
#undef CHORUS_PNCCL

}  // extern "C"
