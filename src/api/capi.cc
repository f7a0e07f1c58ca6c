// The C API over worlds. The one conversion point from internal Status to
// chorusResult_t is apiCall(): it also records the calling thread's last
// error and stops every exception at the C boundary.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <latch>
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
#include "api/convert.h"
#include "api/process_world.h"
#include "api/staging.h"
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

Status bad(std::string msg) { return Status(StatusCode::kInvalidArgument, std::move(msg)); }

// A rank of an in-process world (threads), or of a process world.
struct CommState {
  std::shared_ptr<InProcessWorld> world;
  int rank = 0;
  std::shared_ptr<ProcessWorld> proc;
  // A process rank on a GPU: its calls staged through host memory
  // (runtime/device_backend.h); chorusCommDestroy waits for them first.
  std::shared_ptr<runtime::StagedQueue> staged;
  uint64_t splits = 0;   // chorusCommSplit calls so far (they pair up by number)
  uint64_t shrinks = 0;  // chorusCommShrink calls so far (the survivors' pair up)
  int size() const { return proc ? proc->size() : world->size(); }
  bool onGpu() const { return staged != nullptr || (world != nullptr && world->onGpu()); }
  Status asyncError() const {
    if (staged != nullptr)
      if (Status st = staged->asyncError(); !st.isOk()) return st;
    return proc ? proc->asyncError() : world->asyncError();
  }
  void abort(Status why) const {
    proc ? proc->abort(std::move(why)) : world->abort(std::move(why));
  }
};

// Handles are ids, never reused, so a destroyed communicator is recognized
// instead of dereferenced.
struct Handles {
  std::mutex mu;
  uintptr_t next = 1;
  std::map<uintptr_t, std::shared_ptr<CommState>> comms;
  int nextAlgo = 1;
  std::map<int, std::shared_ptr<const runtime::VerifiedAlgorithm>> algos;
};
Handles& handles() {
  static Handles* h = new Handles();  // lives for the process: threads may outlive statics
  return *h;
}

chorusComm_t newComm(CommState state) {
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mu);
  uintptr_t id = h.next++;
  h.comms[id] = std::make_shared<CommState>(std::move(state));
  return reinterpret_cast<chorusComm_t>(id);
}

chorusComm_t newComm(std::shared_ptr<InProcessWorld> w, int rank) {
  CommState cs;
  cs.world = std::move(w);
  cs.rank = rank;
  return newComm(std::move(cs));
}

// `device` >= 0: the rank is on that GPU, its calls staged through host memory.
Status initProcessComm(chorusComm_t* comm, Result<std::shared_ptr<ProcessWorld>> pw,
                       int device = -1) {
  if (!pw.isOk()) return pw.status();
  int rank = pw.value()->rank();
  CommState cs;
  cs.rank = rank;
  cs.proc = std::move(pw).value();
  if (device >= 0) {
    const runtime::DeviceBackend* gpu = deviceBackend();
    if (gpu == nullptr) return noDeviceBackend("a device was given");
    auto q = gpu->makeStagedQueue(device, cs.proc->options().timeoutMs);
    if (!q.isOk()) return q.status();
    cs.staged = std::move(q).value();
  }
  *comm = newComm(std::move(cs));
  return Status::ok();
}

Status initProcessComm(chorusComm_t* comm, const runtime::BootstrapConfig& config) {
  return initProcessComm(comm, ProcessWorld::create(config, WorldOptions::fromEnvironment()));
}

Result<std::shared_ptr<CommState>> lookup(chorusComm_t comm) {
  if (comm == nullptr) return bad("communicator is NULL");
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mu);
  auto it = h.comms.find(reinterpret_cast<uintptr_t>(comm));
  if (it == h.comms.end())
    return bad("communicator " + std::to_string(reinterpret_cast<uintptr_t>(comm)) +
               " is not live (destroyed, aborted, or never created)");
  return it->second;
}

// Ends a handle; the world goes when its last communicator does. `flush`:
// enqueued staged calls finish first (bounded by the timeout), as NCCL's
// destroy finalizes (dropped, their outputs would silently stay as they were).
Status destroyComm(chorusComm_t comm, bool flush) {
  std::shared_ptr<CommState> cs;
  {
    Handles& h = handles();
    std::lock_guard<std::mutex> lock(h.mu);
    auto it = h.comms.find(reinterpret_cast<uintptr_t>(comm));
    if (comm == nullptr || it == h.comms.end())
      return bad("communicator is not live (destroyed twice, or never created)");
    cs = std::move(it->second);
    h.comms.erase(it);
  }
  if (flush && cs->staged != nullptr) (void)cs->staged->synchronize();
  return Status::ok();
}

// Calls between GroupStart and GroupEnd, per thread.
struct CallGroup {
  int depth = 0;
  std::vector<std::pair<std::shared_ptr<CommState>, Op>> ops;
  Status firstError;  // a call rejected while grouping
};
thread_local CallGroup group;

// apiCall for the calls a group holds (collectives, send/recv): one refused
// while grouping is remembered, and chorusGroupEnd then drops the whole
// group and returns it, as NCCL's does (the others would wait for a call
// that never comes).
template <class F>
chorusResult_t groupedCall(const char* fn, F&& f) noexcept {
  const bool grouping = group.depth > 0;
  Status refused;
  chorusResult_t r = apiCall(fn, [&]() -> Status {
    Status st = f();
    refused = st;
    return st;
  });
  if (r != chorusSuccess && grouping && group.firstError.isOk())
    group.firstError = Status(refused.isOk() ? StatusCode::kInternal : refused.code(), lastError);
  return r;
}

// A process rank's part of a group: its collectives in order, then its
// sends and receives together.
Status runProcessOps(ProcessWorld* w, const std::vector<const Op*>& mine) {
  Status st;
  std::vector<const Op*> sendRecv;
  for (const Op* op : mine) {
    if (op->kind != Op::Kind::kCollective) {
      sendRecv.push_back(op);
    } else if (Status s = w->collective(*op); st.isOk() && !s.isOk()) {
      st = s;
    }
  }
  if (!sendRecv.empty())
    if (Status s = w->pointToPoint(sendRecv); st.isOk() && !s.isOk()) st = s;
  return st;
}

// Enqueues one staged rank's ops of a group as one call: every buffer
// staged through host memory (api/staging.h), the group run by the process
// world on the rank's worker, the ops' streams joined around it (as NCCL's
// group).
Status enqueueStaged(const CommState& cs, std::vector<Op> ops) {
  std::vector<void*> streams;
  for (const Op& op : ops)
    if (std::find(streams.begin(), streams.end(), op.stream) == streams.end())
      streams.push_back(op.stream);
  StagingPlan plan = planStaging(ops, cs.rank, cs.size());
  std::vector<StagingPlan::Where> where = plan.where;
  std::shared_ptr<ProcessWorld> w = cs.proc;
  auto run = [w, ops = std::move(ops), where](const std::vector<void*>& host) {
    std::vector<Op> onHost = ops;
    std::vector<const Op*> mine;
    for (size_t i = 0; i < onHost.size(); ++i) {
      auto at = [&](int region, size_t off) {
        return static_cast<unsigned char*>(host[static_cast<size_t>(region)]) + off;
      };
      if (where[i].sendRegion >= 0)
        onHost[i].args.sendbuff = at(where[i].sendRegion, where[i].sendOff);
      if (where[i].recvRegion >= 0)
        onHost[i].args.recvbuff = at(where[i].recvRegion, where[i].recvOff);
      onHost[i].stream = nullptr;
      mine.push_back(&onHost[i]);
    }
    return runProcessOps(w.get(), mine);
  };
  return cs.staged->enqueue(streams, std::move(plan.regions), std::move(run));
}

// Posts every op, runs the collectives (on this thread if there is one,
// else on the ranks' helper threads), waits for sends and receives.
Status runOps(std::vector<std::pair<std::shared_ptr<CommState>, Op>> ops) {
  std::vector<std::pair<InProcessWorld*, std::shared_ptr<Ticket>>> colls, p2p;
  Status first;
  auto keep = [&first](const Status& s) {
    if (first.isOk() && !s.isOk()) first = s;
  };
  // Process-style ranks: each one's collectives in order, then its sends and
  // receives together.
  std::vector<std::pair<ProcessWorld*, std::vector<const Op*>>> procs;
  // Staged GPU process ranks: each one's ops of the group, enqueued as one.
  std::vector<std::pair<const CommState*, std::vector<Op>>> staged;
  for (auto& [cs, op] : ops) {
    if (cs->staged != nullptr) {
      const CommState* key = cs.get();
      auto it =
          std::find_if(staged.begin(), staged.end(), [&](const auto& p) { return p.first == key; });
      if (it == staged.end()) it = staged.insert(staged.end(), {key, {}});
      it->second.push_back(std::move(op));
      continue;
    }
    if (cs->proc != nullptr) {
      auto it = std::find_if(procs.begin(), procs.end(),
                             [&](const auto& p) { return p.first == cs->proc.get(); });
      if (it == procs.end()) it = procs.insert(procs.end(), {cs->proc.get(), {}});
      it->second.push_back(&op);
      continue;
    }
    bool isColl = op.kind == Op::Kind::kCollective;
    auto t = cs->world->post(cs->rank, std::move(op));
    (isColl ? colls : p2p).emplace_back(cs->world.get(), t);
  }
  if (colls.size() == 1) {
    keep(colls[0].first->complete(colls[0].second));
  } else if (!colls.empty()) {
    std::latch done(static_cast<std::ptrdiff_t>(colls.size()));
    std::vector<Status> results(colls.size());
    for (size_t i = 0; i < colls.size(); ++i) {
      colls[i].first->dispatch(colls[i].second, [&results, &done, i](Status s) {
        results[i] = std::move(s);
        done.count_down();
      });
    }
    done.wait();
    for (const Status& s : results) keep(s);
  }
  for (auto& [w, t] : p2p) keep(w->complete(t));
  for (auto& [cs, mine] : staged) keep(enqueueStaged(*cs, std::move(mine)));
  const auto runProc = runProcessOps;
  if (procs.size() == 1) {
    keep(runProc(procs[0].first, procs[0].second));
  } else if (!procs.empty()) {
    // One thread driving several process-style ranks (threads and processes
    // mixed): each on a thread of its own, so that none waits on another.
    std::vector<Status> results(procs.size());
    std::vector<std::thread> ts;
    for (size_t i = 0; i < procs.size(); ++i)
      ts.emplace_back([&, i] { results[i] = runProc(procs[i].first, procs[i].second); });
    for (auto& t : ts) t.join();
    for (const Status& s : results) keep(s);
  }
  return first;
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
    return bad("rank " + std::to_string(cs.value()->rank) + ": " + op.describe() +
               ": a buffer is GPU device memory, but this communicator's ranks are on the host "
               "(chorusCommInitAll with a devlist makes a GPU communicator)");
  auto t = fromC(type);
  if (!t.isOk()) return t.status();
  op.args.type = t.value();
  if (group.depth > 0) {
    group.ops.emplace_back(cs.value(), std::move(op));
    return Status::ok();
  }
  std::vector<std::pair<std::shared_ptr<CommState>, Op>> one;
  one.emplace_back(cs.value(), std::move(op));
  return runOps(std::move(one));
}

Op collective(CollectiveKind k, const void* send, void* recv, size_t count) {
  Op op;
  op.kind = Op::Kind::kCollective;
  op.collective = k;
  op.args.sendbuff = send;
  op.args.recvbuff = recv;
  op.args.count = count;
  return op;
}

Status withOp(chorusRedOp_t redop, Op& op) {
  auto o = fromC(redop);
  if (!o.isOk()) return o.status();
  op.args.op = o.value();
  return Status::ok();
}

// The in-process rendezvous of chorusCommInitRank.
struct Pending {
  int nranks = 0;
  std::shared_ptr<InProcessWorld> world;  // made by the last rank to join
  std::vector<bool> joined;
  std::vector<int> devices;  // by rank; -1: on the host
  int count = 0;
  Status error;  // why the joined ranks cannot form a world
};
std::mutex pendingMu;
std::condition_variable pendingCv;
std::map<std::string, std::shared_ptr<Pending>>& pendings() {
  static auto* p = new std::map<std::string, std::shared_ptr<Pending>>();
  return *p;
}

// One INFO line when ranks of a GPU world share a GPU (NCCL refuses that;
// here they are one world on the device).
void logSharedGpus(const std::vector<int>& devices) {
  std::map<int, std::vector<int>> ranksOf;
  for (size_t r = 0; r < devices.size(); ++r) ranksOf[devices[r]].push_back(static_cast<int>(r));
  for (const auto& [device, ranks] : ranksOf) {
    if (ranks.size() < 2) continue;
    std::string list;
    for (int r : ranks) {  // (appended piece by piece: GCC 12's -Wrestrict at -O3)
      if (!list.empty()) list += ',';
      list += std::to_string(r);
    }
    logLine(LogLevel::kInfo, "ranks " + list + " share GPU " + std::to_string(device) +
                                 " (NCCL refuses this; Chorus runs them as one world there)");
  }
}

// chorusCommInitRank(Device): meet the other ranks at the id's root; ranks
// all in this process make one in-process world (on GPUs if they pass
// devices), else each is a process-style rank.
Status initRank(chorusComm_t* comm, int nranks, const chorusUniqueId& commId, int rank,
                int device) {
  if (comm == nullptr) return bad("comm is NULL");
  *comm = nullptr;
  if (nranks < 1) return bad("nranks must be >= 1, got " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    return bad("rank " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
  if (device >= 0) {
    const runtime::DeviceBackend* gpu = deviceBackend();
    if (gpu == nullptr) return noDeviceBackend("a device was given");
    Result<int> gpus = gpu->deviceCount();
    if (!gpus.isOk()) return gpus.status();
    if (device >= gpus.value())
      return bad("rank " + std::to_string(rank) + ": device " + std::to_string(device) +
                 " is not a GPU of this process (it sees " + std::to_string(gpus.value()) + ")");
  }
  std::string id(commId.internal, strnlen(commId.internal, sizeof(commId.internal)));
  if (id.rfind("chorus-tcp:", 0) == 0) {  // ranks in several processes
    auto config = runtime::decodeRootId(id);
    if (!config.isOk()) return config.status();
    config.value().rank = rank;
    config.value().nranks = nranks;
    return initProcessComm(
        comm, ProcessWorld::create(config.value(), WorldOptions::fromEnvironment()), device);
  }
  if (id.rfind(runtime::kRendezvousTag, 0) != 0)
    return bad("the unique id did not come from chorusGetUniqueId");
  WorldOptions options = WorldOptions::fromEnvironment();
  // Meet the other ranks, wherever they are, at the id's root.
  auto met = runtime::meetAtRoot(id, rank, nranks, options.timeoutMs);
  if (!met.isOk()) return met.status();
  if (!met.value().threads) {
    // Ranks in several processes; on GPUs, their calls are staged through
    // host memory (cuda/staged.h).
    if (met.value().listening == nullptr)
      return initProcessComm(comm, ProcessWorld::create(met.value().config, options), device);
    CHORUS_RETURN_IF_ERROR(met.value().listening->accept());
    return initProcessComm(comm, ProcessWorld::create(std::move(met.value().listening), options),
                           device);
  }
  // Every rank lives in this process: one in-process world.
  std::unique_lock<std::mutex> lock(pendingMu);
  auto& p = pendings()[id];
  if (p == nullptr) {
    p = std::make_shared<Pending>();
    p->nranks = nranks;
    p->joined.assign(static_cast<size_t>(nranks), false);
    p->devices.assign(static_cast<size_t>(nranks), -1);
  }
  std::shared_ptr<Pending> mine = p;
  if (mine->nranks != nranks)
    return bad("rank " + std::to_string(rank) + " says nranks " + std::to_string(nranks) +
               ", an earlier rank said " + std::to_string(mine->nranks));
  if (mine->joined[static_cast<size_t>(rank)])
    return bad("rank " + std::to_string(rank) + " joined this communicator twice");
  mine->joined[static_cast<size_t>(rank)] = true;
  mine->devices[static_cast<size_t>(rank)] = device;
  if (++mine->count == nranks) {
    pendings().erase(id);
    auto onGpu =
        std::count_if(mine->devices.begin(), mine->devices.end(), [](int d) { return d >= 0; });
    if (onGpu > 0 && onGpu < nranks)
      mine->error =
          bad("ranks of one communicator are on GPUs and on the host; pass a device "
              "for all of them or none");
    if (onGpu == nranks) {
      options.devices = mine->devices;
      logSharedGpus(options.devices);
    }
    mine->world = std::make_shared<InProcessWorld>(nranks, options);
    pendingCv.notify_all();
  }
  bool all = pendingCv.wait_for(lock, std::chrono::milliseconds(options.timeoutMs),
                                [&] { return mine->world != nullptr; });
  if (!all) {
    mine->joined[static_cast<size_t>(rank)] = false;
    --mine->count;
    return Status(StatusCode::kTimeout, "rank " + std::to_string(rank) + ": only " +
                                            std::to_string(mine->count + 1) + " of " +
                                            std::to_string(nranks) + " ranks joined in time");
  }
  lock.unlock();
  if (!mine->error.isOk()) return mine->error;
  *comm = newComm(mine->world, rank);
  return Status::ok();
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
  Op o = collective(k, send, recv, whole);
  o.root = root;
  const CollectiveTraits& traits = chorus::traits(k);
  if (traits.reduces) CHORUS_RETURN_IF_ERROR(withOp(redop, o));
  const bool rootReceives = traits.writes == Ranks::kRoot;
  // Staged GPU ranks never stage a root-only buffer where it is unused
  // (NCCL lets it be anything there, an alias of the other buffer too).
  bool missing = count > 0 && cs.value()->rank != root &&
                 ((rootReceives ? recv : send) == nullptr || cs.value()->staged != nullptr);
  if (missing) {
    if (cs.value()->world != nullptr && cs.value()->world->onGpu())
      return bad("rank " + std::to_string(cs.value()->rank) + ": " + o.describe() +
                 ": GPU communicators need the root-only buffer on every rank (" +
                 std::to_string(whole) + " elements)");
    auto storage = std::make_shared<std::vector<unsigned char>>(whole * dataTypeSize(t.value()));
    (rootReceives ? o.args.recvbuff : const_cast<void*&>(o.args.sendbuff)) = storage->data();
    o.keep = storage;
  }
  return issue(comm, std::move(o), datatype, stream);
}

// chorusCommSplit for ranks of one process (threads, GPU ranks): the k-th
// split of every rank meets here.
struct SplitCall {
  int arrived = 0;
  std::vector<std::pair<int, int>> colorKey;            // by rank
  std::vector<std::shared_ptr<InProcessWorld>> worlds;  // by rank; null: no color
  std::vector<int> newRank;
  bool done = false;
};
std::map<std::pair<const InProcessWorld*, uint64_t>, std::shared_ptr<SplitCall>>& splitCalls() {
  static auto* m =
      new std::map<std::pair<const InProcessWorld*, uint64_t>, std::shared_ptr<SplitCall>>();
  return *m;
}

// Ranks by color, each color's ordered by (key, rank).
std::map<int, std::vector<int>> splitGroups(const std::vector<std::pair<int, int>>& colorKey) {
  std::map<int, std::vector<int>> groups;
  for (int r = 0; r < static_cast<int>(colorKey.size()); ++r)
    if (colorKey[static_cast<size_t>(r)].first != CHORUS_SPLIT_NOCOLOR)
      groups[colorKey[static_cast<size_t>(r)].first].push_back(r);
  for (auto& [color, ranks] : groups)
    std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) {
      return colorKey[static_cast<size_t>(a)].second < colorKey[static_cast<size_t>(b)].second;
    });
  return groups;
}

// `expected`: how many ranks call (all of them for a split; the survivors
// for a shrink, whose left-out ranks count as having no color). Shrinks are
// numbered apart from splits: the left-out ranks make no shrink call.
Status splitInProcess(CommState& cs, int color, int key, chorusComm_t* newcomm, int expected) {
  const InProcessWorld& parent = *cs.world;
  const int n = parent.size();
  const bool shrinking = expected < n;
  const uint64_t seq = shrinking ? (cs.shrinks++ | (uint64_t{1} << 63)) : cs.splits++;
  std::unique_lock<std::mutex> lock(pendingMu);
  auto& slot = splitCalls()[{&parent, seq}];
  if (slot == nullptr) {
    slot = std::make_shared<SplitCall>();
    slot->colorKey.assign(static_cast<size_t>(n), {CHORUS_SPLIT_NOCOLOR, 0});
    slot->worlds.resize(static_cast<size_t>(n));
    slot->newRank.assign(static_cast<size_t>(n), -1);
  }
  std::shared_ptr<SplitCall> call = slot;
  call->colorKey[static_cast<size_t>(cs.rank)] = {color, key};
  if (++call->arrived == expected) {
    splitCalls().erase({&parent, seq});
    for (const auto& [c, ranks] : splitGroups(call->colorKey)) {
      WorldOptions o = parent.options();
      o.devices.clear();
      for (int r : ranks)
        if (parent.onGpu()) o.devices.push_back(parent.options().devices[static_cast<size_t>(r)]);
      auto w = std::make_shared<InProcessWorld>(static_cast<int>(ranks.size()), o);
      for (size_t i = 0; i < ranks.size(); ++i) {
        call->worlds[static_cast<size_t>(ranks[i])] = w;
        call->newRank[static_cast<size_t>(ranks[i])] = static_cast<int>(i);
      }
    }
    call->done = true;
    pendingCv.notify_all();
  }
  int timeoutMs = parent.options().timeoutMs;
  if (!pendingCv.wait_for(lock, std::chrono::milliseconds(timeoutMs), [&] { return call->done; })) {
    // Withdrawn, as if it never called: late ranks must not complete the
    // split without it, and its next split meets theirs (same number).
    Status st(StatusCode::kTimeout, "rank " + std::to_string(cs.rank) + ": split: only " +
                                        std::to_string(call->arrived) + " of " +
                                        std::to_string(expected) + " ranks called in time");
    call->colorKey[static_cast<size_t>(cs.rank)] = {CHORUS_SPLIT_NOCOLOR, 0};
    if (--call->arrived == 0) splitCalls().erase({&parent, seq});
    (shrinking ? cs.shrinks : cs.splits) = seq & ~(uint64_t{1} << 63);
    return st;
  }
  lock.unlock();
  auto w = call->worlds[static_cast<size_t>(cs.rank)];
  if (w != nullptr) *newcomm = newComm(w, call->newRank[static_cast<size_t>(cs.rank)]);
  return Status::ok();
}

// chorusCommSplit for process ranks: colors and keys, then each new
// communicator's unique id (made by its first rank), go round the parent.
Status splitProcessesOnHost(CommState& cs, int color, int key, chorusComm_t* newcomm, int device) {
  ProcessWorld& parent = *cs.proc;
  const int n = parent.size();
  std::vector<int64_t> mine{color, key}, all(2 * static_cast<size_t>(n));
  Op op = collective(CollectiveKind::kAllGather, mine.data(), all.data(), 2);
  op.args.type = DataType::kInt64;
  CHORUS_RETURN_IF_ERROR(parent.collective(op));
  std::vector<std::pair<int, int>> colorKey;
  for (int r = 0; r < n; ++r)
    colorKey.emplace_back(static_cast<int>(all[2 * static_cast<size_t>(r)]),
                          static_cast<int>(all[2 * static_cast<size_t>(r) + 1]));
  auto groups = splitGroups(colorKey);
  chorusUniqueId myId{};
  auto it = groups.find(color);
  int newRank = -1;
  if (it != groups.end()) {
    newRank = static_cast<int>(std::find(it->second.begin(), it->second.end(), cs.rank) -
                               it->second.begin());
    if (newRank == 0) {
      auto id = runtime::startRendezvousRoot(parent.options().timeoutMs);
      if (!id.isOk()) return id.status();
      if (id.value().size() >= sizeof(myId.internal))
        return Status(StatusCode::kInternal, "unique id text too long: " + id.value());
      std::memcpy(myId.internal, id.value().data(), id.value().size());
    }
  }
  std::vector<chorusUniqueId> ids(static_cast<size_t>(n));
  Op idOp = collective(CollectiveKind::kAllGather, &myId, ids.data(), sizeof(myId));
  idOp.args.type = DataType::kUint8;
  CHORUS_RETURN_IF_ERROR(parent.collective(idOp));
  if (it == groups.end()) return Status::ok();
  return initRank(newcomm, static_cast<int>(it->second.size()),
                  ids[static_cast<size_t>(it->second[0])], newRank, device);
}

Status splitProcesses(CommState& cs, int color, int key, chorusComm_t* newcomm) {
  // A staged rank's process world is its worker's: the exchanges run there,
  // after the calls enqueued before them; the new ranks stay on the GPU.
  if (cs.staged != nullptr) {
    int device = cs.staged->device();
    return cs.staged->runInOrder(
        [&] { return splitProcessesOnHost(cs, color, key, newcomm, device); });
  }
  return splitProcessesOnHost(cs, color, key, newcomm, -1);
}

// chorusCommShrink for process ranks: the first survivor makes the new
// communicator's unique id and sends it to the others over the parent's
// point-to-point links (the left-out ranks take no part).
Status shrinkProcessesOnHost(CommState& cs, const std::vector<int>& survivors,
                             chorusComm_t* newcomm, int device) {
  const int leader = survivors[0];
  const int newRank =
      static_cast<int>(std::find(survivors.begin(), survivors.end(), cs.rank) - survivors.begin());
  chorusUniqueId id{};
  std::vector<Op> ops;
  if (cs.rank == leader) {
    auto made = runtime::startRendezvousRoot(cs.proc->options().timeoutMs);
    if (!made.isOk()) return made.status();
    if (made.value().size() >= sizeof(id.internal))
      return Status(StatusCode::kInternal, "unique id text too long: " + made.value());
    std::memcpy(id.internal, made.value().data(), made.value().size());
    for (size_t i = 1; i < survivors.size(); ++i) {
      Op send;
      send.kind = Op::Kind::kSend;
      send.args.sendbuff = &id;
      send.args.count = sizeof(id);
      send.args.type = DataType::kUint8;
      send.peer = survivors[i];
      ops.push_back(send);
    }
  } else {
    Op recv;
    recv.kind = Op::Kind::kRecv;
    recv.args.recvbuff = &id;
    recv.args.count = sizeof(id);
    recv.args.type = DataType::kUint8;
    recv.peer = leader;
    ops.push_back(recv);
  }
  std::vector<const Op*> mine;
  for (const Op& op : ops) mine.push_back(&op);
  if (!mine.empty()) CHORUS_RETURN_IF_ERROR(cs.proc->pointToPoint(mine));
  return initRank(newcomm, static_cast<int>(survivors.size()), id, newRank, device);
}

Status shrink(CommState& cs, const std::vector<int>& survivors, bool abortFirst,
              chorusComm_t* newcomm) {
  if (cs.world != nullptr) {
    if (abortFirst)
      cs.world->abort(
          Status(StatusCode::kAborted,
                 "rank " + std::to_string(cs.rank) + " shrank the communicator, ending its calls"));
    // Survivors call with color 0 ordered by rank; the others count as none.
    return splitInProcess(cs, 0, cs.rank, newcomm, static_cast<int>(survivors.size()));
  }
  if (abortFirst)
    return Status(StatusCode::kUnsupported,
                  "shrink with abort on ranks in several processes: the new communicator's id "
                  "travels over the parent's links, which the abort ends; shrink without it");
  if (cs.staged != nullptr) {
    int device = cs.staged->device();
    return cs.staged->runInOrder(
        [&] { return shrinkProcessesOnHost(cs, survivors, newcomm, device); });
  }
  return shrinkProcessesOnHost(cs, survivors, newcomm, -1);
}
}  // namespace
}  // namespace chorus::api

using namespace chorus;       // NOLINT: the C entry points below
using namespace chorus::api;  // NOLINT

extern "C" {

chorusResult_t chorusGetVersion(int* version) {
  return apiCall("chorusGetVersion", [&] {
    if (version == nullptr) return bad("version is NULL");
    *version = CHORUS_VERSION_CODE;
    return Status::ok();
  });
}

chorusResult_t chorusMemAlloc(void** ptr, size_t size) {
  return apiCall("chorusMemAlloc", [&] {
    if (ptr == nullptr) return bad("ptr is NULL");
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
    if (uniqueId == nullptr) return bad("uniqueId is NULL");
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
    if (comm == nullptr) return bad("comm is NULL");
    *comm = nullptr;
    auto config = runtime::bootstrapConfigFromEnvironment();
    if (!config.isOk()) return config.status();
    return initProcessComm(comm, config.value());
  });
}

chorusResult_t chorusCommInitAll(chorusComm_t* comm, int ndev, const int* devlist) {
  return apiCall("chorusCommInitAll", [&]() -> Status {
    if (comm == nullptr) return bad("comm is NULL");
    if (ndev < 1) return bad("ndev must be >= 1, got " + std::to_string(ndev));
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
          return bad("devlist[" + std::to_string(r) + "] = " + std::to_string(devlist[r]) +
                     " is not a GPU of this process (it sees " + std::to_string(gpus.value()) +
                     ")");
        options.devices.push_back(devlist[r]);
      }
    }
    logSharedGpus(options.devices);
    auto world = std::make_shared<InProcessWorld>(ndev, options);
    for (int r = 0; r < ndev; ++r) comm[r] = newComm(world, r);
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
    cs.value()->abort(Status(StatusCode::kAborted, "rank " + std::to_string(cs.value()->rank) +
                                                       " aborted the communicator"));
    return destroyComm(comm, /*flush=*/false);  // an abort does not wait
  });
}

chorusResult_t chorusCommRevoke(chorusComm_t comm) {
  return apiCall("chorusCommRevoke", [&]() -> Status {
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    cs.value()->abort(Status(StatusCode::kAborted, "rank " + std::to_string(cs.value()->rank) +
                                                       " revoked the communicator"));
    return Status::ok();
  });
}

chorusResult_t chorusCommGetAsyncError(chorusComm_t comm, chorusResult_t* asyncError) {
  return apiCall("chorusCommGetAsyncError", [&]() -> Status {
    if (asyncError == nullptr) return bad("asyncError is NULL");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    *asyncError = toResult(cs.value()->asyncError().code());
    return Status::ok();
  });
}

chorusResult_t chorusCommCount(const chorusComm_t comm, int* count) {
  return apiCall("chorusCommCount", [&]() -> Status {
    if (count == nullptr) return bad("count is NULL");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    *count = cs.value()->size();
    return Status::ok();
  });
}

chorusResult_t chorusCommUserRank(const chorusComm_t comm, int* rank) {
  return apiCall("chorusCommUserRank", [&]() -> Status {
    if (rank == nullptr) return bad("rank is NULL");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    *rank = cs.value()->rank;
    return Status::ok();
  });
}

chorusResult_t chorusAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               chorusDataType_t datatype, chorusRedOp_t op, chorusComm_t comm,
                               chorusStream_t stream) {
  return groupedCall("chorusAllReduce", [&] {
    Op o = collective(CollectiveKind::kAllReduce, sendbuff, recvbuff, count);
    if (Status st = withOp(op, o); !st.isOk()) return st;
    return issue(comm, std::move(o), datatype, stream);
  });
}

chorusResult_t chorusBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               chorusDataType_t datatype, int root, chorusComm_t comm,
                               chorusStream_t stream) {
  return groupedCall("chorusBroadcast", [&] {
    return rootedCall(comm, CollectiveKind::kBroadcast, sendbuff, recvbuff, count, datatype,
                      chorusSum, root, stream);
  });
}

chorusResult_t chorusReduce(const void* sendbuff, void* recvbuff, size_t count,
                            chorusDataType_t datatype, chorusRedOp_t op, int root,
                            chorusComm_t comm, chorusStream_t stream) {
  return groupedCall("chorusReduce", [&] {
    return rootedCall(comm, CollectiveKind::kReduce, sendbuff, recvbuff, count, datatype, op, root,
                      stream);
  });
}

chorusResult_t chorusAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               chorusDataType_t datatype, chorusComm_t comm,
                               chorusStream_t stream) {
  return groupedCall("chorusAllGather", [&] {
    return issue(comm, collective(CollectiveKind::kAllGather, sendbuff, recvbuff, sendcount),
                 datatype, stream);
  });
}

chorusResult_t chorusReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   chorusDataType_t datatype, chorusRedOp_t op, chorusComm_t comm,
                                   chorusStream_t stream) {
  return groupedCall("chorusReduceScatter", [&] {
    Op o = collective(CollectiveKind::kReduceScatter, sendbuff, recvbuff, recvcount);
    if (Status st = withOp(op, o); !st.isOk()) return st;
    return issue(comm, std::move(o), datatype, stream);
  });
}

chorusResult_t chorusAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                              chorusDataType_t datatype, chorusComm_t comm, chorusStream_t stream) {
  return groupedCall("chorusAllToAll", [&] {
    return issue(comm, collective(CollectiveKind::kAllToAll, sendbuff, recvbuff, count), datatype,
                 stream);
  });
}

chorusResult_t chorusGather(const void* sendbuff, void* recvbuff, size_t count,
                            chorusDataType_t datatype, int root, chorusComm_t comm,
                            chorusStream_t stream) {
  return groupedCall("chorusGather", [&] {
    return rootedCall(comm, CollectiveKind::kGather, sendbuff, recvbuff, count, datatype, chorusSum,
                      root, stream);
  });
}

chorusResult_t chorusScatter(const void* sendbuff, void* recvbuff, size_t count,
                             chorusDataType_t datatype, int root, chorusComm_t comm,
                             chorusStream_t stream) {
  return groupedCall("chorusScatter", [&] {
    return rootedCall(comm, CollectiveKind::kScatter, sendbuff, recvbuff, count, datatype,
                      chorusSum, root, stream);
  });
}

chorusResult_t chorusCommSplit(chorusComm_t comm, int color, int key, chorusComm_t* newcomm) {
  return apiCall("chorusCommSplit", [&]() -> Status {
    if (newcomm == nullptr) return bad("newcomm is NULL");
    *newcomm = nullptr;
    if (color < CHORUS_SPLIT_NOCOLOR)
      return bad("color " + std::to_string(color) +
                 " is negative (CHORUS_SPLIT_NOCOLOR, -1, is the only negative color)");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    if (cs.value()->proc != nullptr) return splitProcesses(*cs.value(), color, key, newcomm);
    return splitInProcess(*cs.value(), color, key, newcomm, cs.value()->size());
  });
}

chorusResult_t chorusCommShrink(chorusComm_t comm, const int* excludeRanks, int nexclude,
                                int abortFirst, chorusComm_t* newcomm) {
  return apiCall("chorusCommShrink", [&]() -> Status {
    if (newcomm == nullptr) return bad("newcomm is NULL");
    *newcomm = nullptr;
    if (nexclude < 0 || (nexclude > 0 && excludeRanks == nullptr))
      return bad("excludeRanks must list nexclude >= 0 ranks");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    const int n = cs.value()->size();
    std::vector<bool> out(static_cast<size_t>(n), false);
    for (int i = 0; i < nexclude; ++i) {
      int r = excludeRanks[i];
      if (r < 0 || r >= n)
        return bad("excluded rank " + std::to_string(r) + " is not a rank of this " +
                   std::to_string(n) + "-rank communicator");
      if (r == cs.value()->rank)
        return bad("rank " + std::to_string(r) + " excludes itself: a left-out rank does not call");
      out[static_cast<size_t>(r)] = true;
    }
    std::vector<int> survivors;
    for (int r = 0; r < n; ++r)
      if (!out[static_cast<size_t>(r)]) survivors.push_back(r);
    return shrink(*cs.value(), survivors, abortFirst != 0, newcomm);
  });
}

chorusResult_t chorusCommCuDevice(const chorusComm_t comm, int* device) {
  return apiCall("chorusCommCuDevice", [&]() -> Status {
    if (device == nullptr) return bad("device is NULL");
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    const CommState& c = *cs.value();
    *device = c.world != nullptr && c.world->onGpu()
                  ? c.world->options().devices[static_cast<size_t>(c.rank)]
                  : -1;
    if (c.staged != nullptr) *device = c.staged->device();
    return Status::ok();
  });
}

chorusResult_t chorusCommFinalize(chorusComm_t comm) {
  return apiCall("chorusCommFinalize", [&]() -> Status {
    auto cs = lookup(comm);
    if (!cs.isOk()) return cs.status();
    if (cs.value()->world != nullptr) return cs.value()->world->synchronize();
    if (cs.value()->staged != nullptr) CHORUS_RETURN_IF_ERROR(cs.value()->staged->synchronize());
    return cs.value()->asyncError();
  });
}

chorusResult_t chorusSend(const void* sendbuff, size_t count, chorusDataType_t datatype, int peer,
                          chorusComm_t comm, chorusStream_t stream) {
  return groupedCall("chorusSend", [&] {
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
  return groupedCall("chorusRecv", [&] {
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
  return apiCall("chorusGroupEnd", [&]() -> Status {
    if (group.depth == 0)
      return Status(StatusCode::kUnsupported, "chorusGroupEnd without chorusGroupStart");
    if (--group.depth > 0) return Status::ok();
    auto ops = std::move(group.ops);
    group.ops.clear();
    Status refused = std::exchange(group.firstError, Status::ok());
    if (!refused.isOk())
      return Status(refused.code(), "a call of the group was refused, so none of its " +
                                        std::to_string(ops.size()) +
                                        " other calls ran: " + refused.message());
    return runOps(std::move(ops));
  });
}

chorusResult_t chorusLoadAlgo(const char* algoFilePath, chorusAlgoHandle_t* handle, int) {
  return apiCall("chorusLoadAlgo", [&]() -> Status {
    if (algoFilePath == nullptr || handle == nullptr) return bad("path or handle is NULL");
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
    if (name == nullptr || handle == nullptr) return bad("name or handle is NULL");
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
  return groupedCall("chorusRunAlgo", [&]() -> Status {
    std::shared_ptr<const runtime::VerifiedAlgorithm> va;
    {
      Handles& h = handles();
      std::lock_guard<std::mutex> lock(h.mu);
      auto it = h.algos.find(handle);
      if (it == h.algos.end())
        return bad("algorithm handle " + std::to_string(handle) + " is not loaded");
      va = it->second;
    }
    Op o = collective(va->algo().collective, sendbuff, recvbuff, count);
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
      return bad("algorithm handle " + std::to_string(handle) + " is not loaded");
    return Status::ok();
  });
}

chorusResult_t chorusRegisterAlgoFile(const char* algoFilePath) {
  return apiCall("chorusRegisterAlgoFile", [&]() -> Status {
    if (algoFilePath == nullptr) return bad("path is NULL");
    return globalRegistry().addFile(algoFilePath);
  });
}

}  // extern "C"
