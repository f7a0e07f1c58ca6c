// The C API over worlds. The one conversion point from internal Status to
// chorusResult_t is apiCall(): it also records the calling thread's last
// error and stops every exception at the C boundary.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "algorithms/classic.h"
#include "api/backends.h"
#include "api/communicator.h"
#include "api/convert.h"
#include "api/process_world.h"
#include "api/world.h"
#include "chorus/chorus.h"
#include "compiler/program_file.h"
#include "core/collectives.h"
#include "core/log.h"
#include "runtime/bootstrap/rendezvous.h"
#include "runtime/plan/selection.h"
#include "runtime/transport/shared_buffers.h"

namespace chorus::api {
namespace {

thread_local std::string lastError;

chorusResult_t toResult(StatusCode c) {
  switch (c) {
    case StatusCode::kOk:
      return chorusSuccess;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kParseError:
      return chorusInvalidArgument;
    case StatusCode::kUnsupported:
      return chorusInvalidUsage;
    case StatusCode::kIoError:
      return chorusSystemError;
    case StatusCode::kTimeout:
      return chorusTimeout;
    case StatusCode::kAborted:
      return chorusRemoteError;
    case StatusCode::kDeadlock:
    case StatusCode::kInternal:
      return chorusInternalError;
  }
  return chorusInternalError;
}

template <class F>
chorusResult_t apiCall(const char* fn, F&& f) noexcept {
  try {
    Status st = f();
    if (st.isOk()) return chorusSuccess;
    lastError = std::string(fn) + ": " + st.message();
    logLine(LogLevel::kInfo, lastError);
    return toResult(st.code());
  } catch (const std::bad_alloc&) {
    lastError = std::string(fn) + ": out of memory";
    return chorusSystemError;
  } catch (const std::exception& e) {
    lastError = std::string(fn) + ": internal error: " + e.what();
    return chorusInternalError;
  } catch (...) {
    lastError = std::string(fn) + ": internal error";
    return chorusInternalError;
  }
}

// Handles are ids, never reused, so a destroyed communicator is recognized
// instead of dereferenced.
struct Handles {
  std::mutex mu;
  uintptr_t next = 1;
  std::map<uintptr_t, std::shared_ptr<Communicator>> comms;
  int nextAlgo = 1;
  std::map<int, std::shared_ptr<const runtime::VerifiedAlgorithm>> algos;
};
Handles& handles() {
  static Handles* h = new Handles();  // lives for the process: threads may outlive statics
  return *h;
}

// A handle of a communicator made at the end of the group its
// chorusCommInitRank was called in; its ranks meet then.
Status stillBeingMade(chorusComm_t comm) {
  return Status(StatusCode::kUnsupported,
                "communicator " + std::to_string(reinterpret_cast<uintptr_t>(comm)) +
                    " is made when the group it was initialized in ends (chorusGroupEnd); only "
                    "collectives and send/recv may use it before");
}

chorusComm_t newComm(std::shared_ptr<Communicator> c) {
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mu);
  uintptr_t id = h.next++;
  h.comms[id] = std::move(c);
  return reinterpret_cast<chorusComm_t>(id);
}

// A handle for what was made; none (NULL) for a rank a split or shrink
// left out.
Status initComm(chorusComm_t* comm, Result<std::shared_ptr<Communicator>> made) {
  if (!made.isOk()) return made.status();
  if (made.value() != nullptr) *comm = newComm(std::move(made).value());
  return Status::ok();
}

Result<std::shared_ptr<Communicator>> lookup(chorusComm_t comm) {
  if (comm == nullptr) return invalidArgument("communicator is NULL");
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mu);
  auto it = h.comms.find(reinterpret_cast<uintptr_t>(comm));
  if (it == h.comms.end())
    return invalidArgument("communicator " + std::to_string(reinterpret_cast<uintptr_t>(comm)) +
                           " is not live (destroyed, aborted, or never created)");
  if (it->second == nullptr) return stillBeingMade(comm);
  return it->second;
}

// Ends a handle; the world goes when its last communicator does. `flush`:
// enqueued staged calls finish first (bounded by the timeout), as NCCL's
// destroy finalizes (dropped, their outputs would silently stay as they were).
Status destroyComm(chorusComm_t comm, bool flush) {
  std::shared_ptr<Communicator> cs;
  {
    Handles& h = handles();
    std::lock_guard<std::mutex> lock(h.mu);
    auto it = h.comms.find(reinterpret_cast<uintptr_t>(comm));
    if (comm == nullptr || it == h.comms.end())
      return invalidArgument("communicator is not live (destroyed twice, or never created)");
    if (it->second == nullptr) return stillBeingMade(comm);
    cs = std::move(it->second);
    h.comms.erase(it);
  }
  if (flush) cs->flush();
  return Status::ok();
}

// A communicator chorusCommInitRank(Device) makes inside a group: its handle
// is given at once; its ranks meet at the group's end (one thread may drive
// every rank, as with NCCL).
struct GroupInit {
  chorusComm_t handle;
  int nranks;
  std::string id;
  int rank;
  int device;
};

// A call on such a communicator: checked and issued at the group's end, once
// the communicator is made.
struct DeferredCall {
  const char* fn;
  std::function<Status()> call;
};

// Calls between GroupStart and GroupEnd, per thread.
struct CallGroup {
  int depth = 0;
  std::vector<GroupInit> inits;
  std::vector<DeferredCall> deferred;
  std::vector<std::pair<std::shared_ptr<Communicator>, Op>> ops;
  Status firstError;  // a call rejected while grouping

  bool makes(chorusComm_t comm) const {
    return std::any_of(inits.begin(), inits.end(),
                       [comm](const GroupInit& i) { return i.handle == comm; });
  }
};
thread_local CallGroup group;

// apiCall for the calls a group holds (collectives, send/recv): one refused
// while grouping is remembered, and chorusGroupEnd then drops the whole
// group and returns it, as NCCL's does (the others would wait for a call
// that never comes). A call on a communicator the group is making waits,
// unchecked, for the group's end.
template <class F>
chorusResult_t groupedCall(const char* fn, chorusComm_t comm, F f) noexcept {
  const bool grouping = group.depth > 0;
  Status refused;
  if (grouping && group.makes(comm)) {
    chorusResult_t r = apiCall(fn, [&] {
      group.deferred.push_back({fn, std::move(f)});
      return Status::ok();
    });
    if (r != chorusSuccess && group.firstError.isOk())
      group.firstError = Status(StatusCode::kInternal, lastError);
    return r;
  }
  chorusResult_t r = apiCall(fn, [&]() -> Status {
    Status st = f();
    refused = st;
    return st;
  });
  if (r != chorusSuccess && grouping && group.firstError.isOk())
    group.firstError = Status(refused.isOk() ? StatusCode::kInternal : refused.code(), lastError);
  return r;
}

Status issue(chorusComm_t comm, Op op, chorusDataType_t type, chorusStream_t stream) {
  auto cs = lookup(comm);
  if (!cs.isOk()) return cs.status();
  const bool gpu = cs.value()->onGpu();
  if (stream != nullptr && !gpu)
    return Status(StatusCode::kUnsupported,
                  "streams need a GPU communicator (chorusCommInitAll with a devlist); pass NULL "
                  "on host");
  op.stream = stream;
  // Device memory given to host ranks would be read by the CPU: refuse it.
  const runtime::DeviceBackend* backend = deviceBackend();
  if (!gpu && backend != nullptr &&
      (backend->isDeviceMemory(op.args.sendbuff) || backend->isDeviceMemory(op.args.recvbuff)))
    return invalidArgument(
        "rank " + std::to_string(cs.value()->rank()) + ": " + op.describe() +
        ": a buffer is GPU device memory, but this communicator's ranks are on the host "
        "(chorusCommInitAll with a devlist makes a GPU communicator)");
  auto t = fromC(type);
  if (!t.isOk()) return t.status();
  op.args.type = t.value();
  if (group.depth > 0) {
    group.ops.emplace_back(cs.value(), std::move(op));
    return Status::ok();
  }
  return cs.value()->runAlone(std::move(op));
}

Status withOp(chorusRedOp_t redop, Op& op) {
  auto o = fromC(redop);
  if (!o.isOk()) return o.status();
  op.args.op = o.value();
  return Status::ok();
}

// chorusCommInitRank(Device): meet the other ranks at the id's root; ranks
// all in this process make one in-process world (on GPUs if they pass
// devices), else each is a process-style rank.
Status initRank(chorusComm_t* comm, int nranks, const chorusUniqueId& commId, int rank,
                int device) {
  if (comm == nullptr) return invalidArgument("comm is NULL");
  *comm = nullptr;
  if (nranks < 1) return invalidArgument("nranks must be >= 1, got " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    return invalidArgument("rank " + std::to_string(rank) + " is not in [0, " +
                           std::to_string(nranks) + ")");
  if (device >= 0) {
    const runtime::DeviceBackend* gpu = deviceBackend();
    if (gpu == nullptr) return noDeviceBackend("a device was given");
    Result<int> gpus = gpu->deviceCount();
    if (!gpus.isOk()) return gpus.status();
    if (device >= gpus.value())
      return invalidArgument("rank " + std::to_string(rank) + ": device " + std::to_string(device) +
                             " is not a GPU of this process (it sees " +
                             std::to_string(gpus.value()) + ")");
  }
  std::string id(commId.internal, strnlen(commId.internal, sizeof(commId.internal)));
  if (group.depth > 0) {  // made at the group's end, with the group's other ranks
    group.inits.push_back({nullptr, nranks, std::move(id), rank, device});
    try {
      group.inits.back().handle = newComm(nullptr);
    } catch (...) {
      group.inits.pop_back();
      throw;
    }
    *comm = group.inits.back().handle;
    return Status::ok();
  }
  return initComm(comm, joinRank(nranks, id, rank, device));
}

// The group's inits, each on a thread of its own (they may be ranks of one
// communicator, meeting each other); a handle whose init failed is no longer
// live. The first failure, naming its rank.
Status makeGroupComms(const std::vector<GroupInit>& inits) {
  std::vector<Result<std::shared_ptr<Communicator>>> made(
      inits.size(), Status(StatusCode::kInternal, "its thread could not be started"));
  {
    std::vector<std::thread> threads;
    try {
      threads.reserve(inits.size());
      for (size_t i = 0; i < inits.size(); ++i)
        threads.emplace_back([&, i]() noexcept {
          const GroupInit& g = inits[i];
          try {
            made[i] = joinRank(g.nranks, g.id, g.rank, g.device);
          } catch (const std::exception& e) {
            made[i] = Status(StatusCode::kInternal, std::string("internal error: ") + e.what());
          } catch (...) {
            made[i] = Status(StatusCode::kInternal, "internal error");
          }
        });
    } catch (...) {  // the rest stay "not started"; their peers time out
    }
    for (auto& t : threads) t.join();
  }
  Status first;
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mu);
  for (size_t i = 0; i < inits.size(); ++i) {
    auto id = reinterpret_cast<uintptr_t>(inits[i].handle);
    if (made[i].isOk()) {
      h.comms[id] = std::move(made[i]).value();
      continue;
    }
    h.comms.erase(id);
    if (first.isOk())
      first = Status(made[i].status().code(),
                     "rank " + std::to_string(inits[i].rank) +
                         " of the group's chorusCommInitRank: " + made[i].status().message());
  }
  return first;
}

// chorusGroupEnd (`run`) or chorusGroupCancel of the outermost group `g`:
// its communicators are made either way (their peers are meeting them), its
// calls run only at an end with none refused.
Status endGroup(CallGroup g, bool run) {
  Status made = makeGroupComms(g.inits);
  if (!run) return made;
  // Calls on the communicators just made, checked as if made before the group.
  group.depth = 1;
  group.ops = std::move(g.ops);
  group.firstError = g.firstError;
  for (DeferredCall& d : g.deferred) groupedCall(d.fn, nullptr, std::move(d.call));
  CallGroup all = std::exchange(group, CallGroup());
  if (!made.isOk())
    return Status(made.code(), made.message() + "; none of the group's " +
                                   std::to_string(all.ops.size()) + " calls ran");
  if (!all.firstError.isOk())
    return Status(all.firstError.code(), "a call of the group was refused, so none of its " +
                                             std::to_string(all.ops.size()) +
                                             " other calls ran: " + all.firstError.message());
  return runGroup(std::move(all.ops));
}

// chorusGroupEnd (`run`) or chorusGroupCancel (`fn`): an inner group only
// closes; the outermost ends.
Status leaveGroup(const char* fn, bool run) {
  if (group.depth == 0)
    return Status(StatusCode::kUnsupported, std::string(fn) + " without chorusGroupStart");
  if (--group.depth > 0) return Status::ok();
  return endGroup(std::exchange(group, CallGroup()), run);
}

// The rooted collectives take a buffer only the root uses (gather's and
// reduce's recvbuff, scatter's and broadcast's sendbuff) on every rank, as an
// algorithm may relay through it; a NULL one on a host rank stands for
// storage of the call's own. `op` is reduce's.
Status rootedCall(chorusComm_t comm, CollectiveKind k, const void* send, void* recv, size_t count,
                  chorusDataType_t datatype, chorusRedOp_t redop, int root, chorusStream_t stream) {
  auto cs = lookup(comm);
  if (!cs.isOk()) return cs.status();
  auto t = fromC(datatype);
  if (!t.isOk()) return t.status();
  const int n = cs.value()->size();
  // The runtime counts gather and scatter in elements of the whole vector.
  const size_t whole = countsWholeVector(k) ? count * static_cast<size_t>(n) : count;
  Op o = collectiveOp(k, send, recv, whole);
  o.root = root;
  const CollectiveTraits& traits = chorus::traits(k);
  if (traits.reduces) CHORUS_RETURN_IF_ERROR(withOp(redop, o));
  const bool rootReceives = traits.writes == Ranks::kRoot;
  // Staged GPU ranks never stage a root-only buffer where it is unused
  // (NCCL lets it be anything there, an alias of the other buffer too).
  const Communicator& c = *cs.value();
  bool missing = count > 0 && c.rank() != root &&
                 ((rootReceives ? recv : send) == nullptr || c.replacesRootOnlyBuffer());
  if (missing) {
    void*& slot = rootReceives ? o.args.recvbuff : const_cast<void*&>(o.args.sendbuff);
    const size_t bytes = whole * dataTypeSize(t.value());
    auto own = cs.value()->rootOnlyStorage(bytes);
    if (own.isOk()) {
      slot = own.value();
    } else if (own.status().code() != StatusCode::kUnsupported) {
      return own.status();
    } else {
      auto storage = std::make_shared<std::vector<unsigned char>>(bytes);
      slot = storage->data();
      o.keep = storage;
    }
  }
  return issue(comm, std::move(o), datatype, stream);
}

}  // namespace
}  // namespace chorus::api

using namespace chorus;       // NOLINT: the C entry points below
using namespace chorus::api;  // NOLINT

extern "C" {

chorusResult_t chorusGetVersion(int* version) {
  return apiCall("chorusGetVersion", [&] {
    if (version == nullptr) return invalidArgument("version is NULL");
    *version = CHORUS_VERSION_CODE;
    return Status::ok();
  });
}

chorusResult_t chorusMemAlloc(void** ptr, size_t size) {
  return apiCall("chorusMemAlloc", [&] {
    if (ptr == nullptr) return invalidArgument("ptr is NULL");
    *ptr = nullptr;
    auto p = runtime::shared_buffers::allocate(size);
    if (!p.isOk()) return p.status();
    *ptr = p.value();
    return Status::ok();
  });
}

chorusResult_t chorusMemFree(void* ptr) {
  return apiCall("chorusMemFree", [&] {
    if (ptr == nullptr) return Status::ok();  // as free(NULL)
    return runtime::shared_buffers::release(ptr);
  });
}

const char* chorusGetErrorString(chorusResult_t result) {
  switch (result) {
    case chorusSuccess:
      return "no error";
    case chorusUnhandledCudaError:
      return "unhandled cuda error";
    case chorusSystemError:
      return "unhandled system error (out of memory, a failed system call)";
    case chorusInternalError:
      return "internal error - please report this issue";
    case chorusInvalidArgument:
      return "invalid argument";
    case chorusInvalidUsage:
      return "invalid usage";
    case chorusRemoteError:
      return "remote process exited or there was a network error; or the communicator was aborted";
    case chorusInProgress:
      return "operation in progress";
    case chorusTimeout:
      return "timeout: a peer did not answer in time (CHORUS_TIMEOUT_S)";
    default:
      return "unknown result code";
  }
}

const char* chorusGetLastError(chorusComm_t) { return lastError.c_str(); }

chorusResult_t chorusGetUniqueId(chorusUniqueId* uniqueId) {
  return apiCall("chorusGetUniqueId", [&] {
    if (uniqueId == nullptr) return invalidArgument("uniqueId is NULL");
    std::memset(uniqueId->internal, 0, sizeof(uniqueId->internal));
    auto id = runtime::startRendezvousRoot(WorldOptions::fromEnvironment().timeoutMs);
    if (!id.isOk()) return id.status();
    if (id.value().size() >= sizeof(uniqueId->internal))
      return Status(StatusCode::kInternal, "unique id text too long: " + id.value());
    std::memcpy(uniqueId->internal, id.value().data(), id.value().size());
    return Status::ok();
  });
}

chorusResult_t chorusCommInitRank(chorusComm_t* comm, int nranks, chorusUniqueId commId, int rank) {
  return apiCall("chorusCommInitRank", [&] { return initRank(comm, nranks, commId, rank, -1); });
}

chorusResult_t chorusCommInitRankDevice(chorusComm_t* comm, int nranks, chorusUniqueId commId,
                                        int rank, int device) {
  return apiCall("chorusCommInitRankDevice",
                 [&] { return initRank(comm, nranks, commId, rank, device); });
}

chorusResult_t chorusCommInitFromEnv(chorusComm_t* comm) {
  return apiCall("chorusCommInitFromEnv", [&]() -> Status {
    if (comm == nullptr) return invalidArgument("comm is NULL");
    *comm = nullptr;
    auto config = runtime::bootstrapConfigFromEnvironment();
    if (!config.isOk()) return config.status();
    return initComm(
        comm, processRank(ProcessWorld::create(config.value(), WorldOptions::fromEnvironment())));
  });
}

chorusResult_t chorusCommInitAll(chorusComm_t* comm, int ndev, const int* devlist) {
  return apiCall("chorusCommInitAll", [&]() -> Status {
    if (comm == nullptr) return invalidArgument("comm is NULL");
    if (ndev < 1) return invalidArgument("ndev must be >= 1, got " + std::to_string(ndev));
    WorldOptions options = WorldOptions::fromEnvironment();
    if (devlist != nullptr) {
      const runtime::DeviceBackend* gpu = deviceBackend();
      if (gpu == nullptr) {
        Status why = noDeviceBackend("devlist names GPUs");
        return Status(why.code(), why.message() + "; pass NULL for ranks on the host");
      }
      Result<int> gpus = gpu->deviceCount();
      if (!gpus.isOk()) return gpus.status();
      for (int r = 0; r < ndev; ++r) {
        if (devlist[r] < 0 || devlist[r] >= gpus.value())
          return invalidArgument(
              "devlist[" + std::to_string(r) + "] = " + std::to_string(devlist[r]) +
              " is not a GPU of this process (it sees " + std::to_string(gpus.value()) + ")");
        options.devices.push_back(devlist[r]);
      }
    }
    logSharedGpus(options.devices);
    auto world = std::make_shared<InProcessWorld>(ndev, options);
    for (int r = 0; r < ndev; ++r) comm[r] = newComm(threadRank(world, r));
    return Status::ok();
  });
}

chorusResult_t chorusCommDestroy(chorusComm_t comm) {
  return apiCall("chorusCommDestroy", [&] { return destroyComm(comm, /*flush=*/true); });
}

chorusResult_t chorusCommAbort(chorusComm_t comm) {
  return apiCall("chorusCommAbort", [&]() -> Status {
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    // Thread and process communicators alike (world is null for the latter).
    cs.value()->abort(Status(StatusCode::kAborted, "rank " + std::to_string(cs.value()->rank()) +
                                                       " aborted the communicator"));
    return destroyComm(comm, /*flush=*/false);  // an abort does not wait
  });
}

chorusResult_t chorusCommRevoke(chorusComm_t comm) {
  return apiCall("chorusCommRevoke", [&]() -> Status {
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    cs.value()->abort(Status(StatusCode::kAborted, "rank " + std::to_string(cs.value()->rank()) +
                                                       " revoked the communicator"));
    return Status::ok();
  });
}

chorusResult_t chorusCommGetAsyncError(chorusComm_t comm, chorusResult_t* asyncError) {
  return apiCall("chorusCommGetAsyncError", [&]() -> Status {
    if (asyncError == nullptr) return invalidArgument("asyncError is NULL");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    Status st = cs.value()->asyncError();
    *asyncError = toResult(st.code());
    // What it was, for chorusGetLastError (as NCCL's ncclGetLastError).
    if (!st.isOk()) lastError = "asynchronous error: " + st.message();
    return Status::ok();
  });
}

chorusResult_t chorusCommCount(const chorusComm_t comm, int* count) {
  return apiCall("chorusCommCount", [&]() -> Status {
    if (count == nullptr) return invalidArgument("count is NULL");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    *count = cs.value()->size();
    return Status::ok();
  });
}

chorusResult_t chorusCommUserRank(const chorusComm_t comm, int* rank) {
  return apiCall("chorusCommUserRank", [&]() -> Status {
    if (rank == nullptr) return invalidArgument("rank is NULL");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    *rank = cs.value()->rank();
    return Status::ok();
  });
}

chorusResult_t chorusAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               chorusDataType_t datatype, chorusRedOp_t op, chorusComm_t comm,
                               chorusStream_t stream) {
  return groupedCall("chorusAllReduce", comm, [=] {
    Op o = collectiveOp(CollectiveKind::kAllReduce, sendbuff, recvbuff, count);
    if (Status st = withOp(op, o); !st.isOk()) return st;
    return issue(comm, std::move(o), datatype, stream);
  });
}

chorusResult_t chorusBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               chorusDataType_t datatype, int root, chorusComm_t comm,
                               chorusStream_t stream) {
  return groupedCall("chorusBroadcast", comm, [=] {
    return rootedCall(comm, CollectiveKind::kBroadcast, sendbuff, recvbuff, count, datatype,
                      chorusSum, root, stream);
  });
}

chorusResult_t chorusReduce(const void* sendbuff, void* recvbuff, size_t count,
                            chorusDataType_t datatype, chorusRedOp_t op, int root,
                            chorusComm_t comm, chorusStream_t stream) {
  return groupedCall("chorusReduce", comm, [=] {
    return rootedCall(comm, CollectiveKind::kReduce, sendbuff, recvbuff, count, datatype, op, root,
                      stream);
  });
}

chorusResult_t chorusAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               chorusDataType_t datatype, chorusComm_t comm,
                               chorusStream_t stream) {
  return groupedCall("chorusAllGather", comm, [=] {
    return issue(comm, collectiveOp(CollectiveKind::kAllGather, sendbuff, recvbuff, sendcount),
                 datatype, stream);
  });
}

chorusResult_t chorusReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   chorusDataType_t datatype, chorusRedOp_t op, chorusComm_t comm,
                                   chorusStream_t stream) {
  return groupedCall("chorusReduceScatter", comm, [=] {
    Op o = collectiveOp(CollectiveKind::kReduceScatter, sendbuff, recvbuff, recvcount);
    if (Status st = withOp(op, o); !st.isOk()) return st;
    return issue(comm, std::move(o), datatype, stream);
  });
}

chorusResult_t chorusAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                              chorusDataType_t datatype, chorusComm_t comm, chorusStream_t stream) {
  return groupedCall("chorusAllToAll", comm, [=] {
    return issue(comm, collectiveOp(CollectiveKind::kAllToAll, sendbuff, recvbuff, count), datatype,
                 stream);
  });
}

chorusResult_t chorusGather(const void* sendbuff, void* recvbuff, size_t count,
                            chorusDataType_t datatype, int root, chorusComm_t comm,
                            chorusStream_t stream) {
  return groupedCall("chorusGather", comm, [=] {
    return rootedCall(comm, CollectiveKind::kGather, sendbuff, recvbuff, count, datatype, chorusSum,
                      root, stream);
  });
}

chorusResult_t chorusScatter(const void* sendbuff, void* recvbuff, size_t count,
                             chorusDataType_t datatype, int root, chorusComm_t comm,
                             chorusStream_t stream) {
  return groupedCall("chorusScatter", comm, [=] {
    return rootedCall(comm, CollectiveKind::kScatter, sendbuff, recvbuff, count, datatype,
                      chorusSum, root, stream);
  });
}

chorusResult_t chorusCommSplit(chorusComm_t comm, int color, int key, chorusComm_t* newcomm) {
  return apiCall("chorusCommSplit", [&]() -> Status {
    if (newcomm == nullptr) return invalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    if (color < CHORUS_SPLIT_NOCOLOR)
      return invalidArgument("color " + std::to_string(color) +
                             " is negative (CHORUS_SPLIT_NOCOLOR, -1, is the only negative color)");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    auto made = cs.value()->split(color, key);
    if (!made.isOk()) return made.status();
    if (made.value() != nullptr) *newcomm = newComm(std::move(made).value());
    return Status::ok();
  });
}

chorusResult_t chorusCommShrink(chorusComm_t comm, const int* excludeRanks, int nexclude,
                                int abortFirst, chorusComm_t* newcomm) {
  return apiCall("chorusCommShrink", [&]() -> Status {
    if (newcomm == nullptr) return invalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    if (nexclude < 0 || (nexclude > 0 && excludeRanks == nullptr))
      return invalidArgument("excludeRanks must list nexclude >= 0 ranks");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    const int n = cs.value()->size();
    std::vector<bool> out(static_cast<size_t>(n), false);
    for (int i = 0; i < nexclude; ++i) {
      int r = excludeRanks[i];
      if (r < 0 || r >= n)
        return invalidArgument("excluded rank " + std::to_string(r) + " is not a rank of this " +
                               std::to_string(n) + "-rank communicator");
      if (r == cs.value()->rank())
        return invalidArgument("rank " + std::to_string(r) +
                               " excludes itself: a left-out rank does not call");
      out[static_cast<size_t>(r)] = true;
    }
    std::vector<int> survivors;
    for (int r = 0; r < n; ++r)
      if (!out[static_cast<size_t>(r)]) survivors.push_back(r);
    return initComm(newcomm, cs.value()->shrink(survivors, abortFirst != 0));
  });
}

chorusResult_t chorusCommCuDevice(const chorusComm_t comm, int* device) {
  return apiCall("chorusCommCuDevice", [&]() -> Status {
    if (device == nullptr) return invalidArgument("device is NULL");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    *device = cs.value()->device();
    return Status::ok();
  });
}

chorusResult_t chorusCommFinalize(chorusComm_t comm) {
  return apiCall("chorusCommFinalize", [&]() -> Status {
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    return cs.value()->finalize();
  });
}

chorusResult_t chorusSend(const void* sendbuff, size_t count, chorusDataType_t datatype, int peer,
                          chorusComm_t comm, chorusStream_t stream) {
  return groupedCall("chorusSend", comm, [=] {
    Op o;
    o.kind = Op::Kind::kSend;
    o.args.sendbuff = sendbuff;
    o.args.count = count;
    o.peer = peer;
    return issue(comm, std::move(o), datatype, stream);
  });
}

chorusResult_t chorusRecv(void* recvbuff, size_t count, chorusDataType_t datatype, int peer,
                          chorusComm_t comm, chorusStream_t stream) {
  return groupedCall("chorusRecv", comm, [=] {
    Op o;
    o.kind = Op::Kind::kRecv;
    o.args.recvbuff = recvbuff;
    o.args.count = count;
    o.peer = peer;
    return issue(comm, std::move(o), datatype, stream);
  });
}

chorusResult_t chorusGroupStart(void) {
  return apiCall("chorusGroupStart", [&] {
    ++group.depth;
    return Status::ok();
  });
}

chorusResult_t chorusGroupEnd(void) {
  return apiCall("chorusGroupEnd", [&] { return leaveGroup("chorusGroupEnd", /*run=*/true); });
}

chorusResult_t chorusGroupCancel(void) {
  return apiCall("chorusGroupCancel",
                 [&] { return leaveGroup("chorusGroupCancel", /*run=*/false); });
}

chorusResult_t chorusLoadAlgo(const char* algoFilePath, chorusAlgoHandle_t* handle, int) {
  return apiCall("chorusLoadAlgo", [&]() -> Status {
    if (algoFilePath == nullptr || handle == nullptr)
      return invalidArgument("path or handle is NULL");
    auto va = runtime::loadVerifiedFile(algoFilePath, &compiler::programFiles());
    if (!va.isOk()) return va.status();
    Handles& h = handles();
    std::lock_guard<std::mutex> lock(h.mu);
    *handle = h.nextAlgo++;
    h.algos[*handle] = va.value();
    return Status::ok();
  });
}

chorusResult_t chorusLoadBuiltinAlgo(const char* name, int nranks, int root,
                                     chorusAlgoHandle_t* handle) {
  return apiCall("chorusLoadBuiltinAlgo", [&]() -> Status {
    if (name == nullptr || handle == nullptr) return invalidArgument("name or handle is NULL");
    auto algo = algorithms::makeClassic(name, nranks, root);
    if (!algo.isOk()) return algo.status();
    auto va = runtime::VerifiedAlgorithm::make(std::move(algo).value());
    if (!va.isOk()) return va.status();
    Handles& h = handles();
    std::lock_guard<std::mutex> lock(h.mu);
    *handle = h.nextAlgo++;
    h.algos[*handle] = va.value();
    return Status::ok();
  });
}

chorusResult_t chorusRunAlgo(const void* sendbuff, void* recvbuff, size_t count,
                             chorusDataType_t datatype, chorusRedOp_t op, int root,
                             chorusAlgoHandle_t handle, chorusComm_t comm, chorusStream_t stream) {
  return groupedCall("chorusRunAlgo", comm, [=]() -> Status {
    std::shared_ptr<const runtime::VerifiedAlgorithm> va;
    {
      Handles& h = handles();
      std::lock_guard<std::mutex> lock(h.mu);
      auto it = h.algos.find(handle);
      if (it == h.algos.end())
        return invalidArgument("algorithm handle " + std::to_string(handle) + " is not loaded");
      va = it->second;
    }
    Op o = collectiveOp(va->algo().collective, sendbuff, recvbuff, count);
    o.root = isRooted(va->algo().collective) ? root : -1;
    o.algo = va;
    if (Status st = withOp(op, o); !st.isOk()) return st;
    return issue(comm, std::move(o), datatype, stream);
  });
}

chorusResult_t chorusUnloadAlgo(chorusAlgoHandle_t handle) {
  return apiCall("chorusUnloadAlgo", [&]() -> Status {
    Handles& h = handles();
    std::lock_guard<std::mutex> lock(h.mu);
    if (h.algos.erase(handle) == 0)
      return invalidArgument("algorithm handle " + std::to_string(handle) + " is not loaded");
    return Status::ok();
  });
}

chorusResult_t chorusRegisterAlgoFile(const char* algoFilePath) {
  return apiCall("chorusRegisterAlgoFile", [&]() -> Status {
    if (algoFilePath == nullptr) return invalidArgument("path is NULL");
    return globalRegistry().addFile(algoFilePath);
  });
}

}  // extern "C"
