#include "api/world.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <tuple>

#include "api/backends.h"
#include "api/call_cache.h"
#include "compiler/program_file.h"
#include "core/check.h"
#include "core/collectives.h"
#include "core/env.h"
#include "core/log.h"

namespace chorus::api {

using runtime::CallArgs;
using runtime::PreparedCall;
using runtime::VerifiedAlgorithm;

WorldOptions WorldOptions::fromEnvironment() {
  WorldOptions o;
  o.timeoutMs = static_cast<int>(std::min<long>(envLong("CHORUS_TIMEOUT_S", 300), 2000000) * 1000);
  o.sliceBytes = static_cast<size_t>(envLong("CHORUS_SLICE_BYTES", 0));
  auto text = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v == nullptr ? "" : v);
  };
  if (std::string t = text("CHORUS_TRANSPORT"); !t.empty()) o.transport = t;
  o.jobId = text("CHORUS_JOB_ID");
  o.crossMemoryAttach = text("CHORUS_CMA") != "0";
  o.tcpSockets = text("CHORUS_TCP_SOCKETS");
  if (!text("CHORUS_SPIN_US").empty())
    o.spinUs = static_cast<int>(std::min<long>(envLong("CHORUS_SPIN_US", -1), 1000000));
  if (!text("CHORUS_RING_MB_PER_PEER").empty())
    o.ringBytesPerPeer =
        static_cast<size_t>(std::clamp<long>(envLong("CHORUS_RING_MB_PER_PEER", 32), 1, 1 << 20))
        << 20;
  o.proveRanks = runtime::proveRanksFromEnvironment();
  // Out of range is the backend's to refuse, naming the range.
  o.instances = static_cast<int>(std::clamp<long>(envLong("CHORUS_INSTANCES", 0), -1, 1 << 20));
  o.gpuLLBytes = static_cast<size_t>(std::clamp<long>(
      envLong("CHORUS_GPU_LL_BYTES", static_cast<long>(o.gpuLLBytes)), 0, long{1} << 40));
  o.gpuIpc = text("CHORUS_GPU_IPC") != "0";
  return o;
}

runtime::DeviceOptions deviceOptions(const WorldOptions& o) {
  runtime::DeviceOptions d;
  d.rankDevices = o.devices;
  d.sliceBytes = o.sliceBytes;
  d.slots = o.slots;
  d.timeoutMs = o.timeoutMs;
  d.instances = o.instances;
  return d;
}

std::string Op::describe() const {
  std::string name = kind == Kind::kSend   ? "send"
                     : kind == Kind::kRecv ? "recv"
                                           : std::string(collectiveName(collective));
  std::string s =
      name + "(count " + std::to_string(args.count) + ", " + std::string(dataTypeName(args.type));
  if (kind == Kind::kCollective && collective != CollectiveKind::kAllGather &&
      collective != CollectiveKind::kAllToAll && collective != CollectiveKind::kBroadcast)
    s += ", " + std::string(reduceOpName(args.op));
  if (root >= 0) s += ", root " + std::to_string(root);
  if (peer >= 0) s += ", peer " + std::to_string(peer);
  if (algo != nullptr) s += ", algorithm '" + algo->algo().name + "'";
  return s + ")";
}

runtime::AlgorithmRegistry& globalRegistry() {
  static runtime::AlgorithmRegistry* r = [] {
    // Lives for the process; CHORUS_ALGO_DIR may hold compact program files.
    auto* reg = new runtime::AlgorithmRegistry(&compiler::programFiles());
    reg->loadFromEnvironment();
    return reg;
  }();
  return *r;
}

struct Assembly {
  uint64_t seq = 0;
  std::vector<std::optional<Op>> ops;
  int arrived = 0;
  std::atomic<bool> resolved{false};  // written under InProcessWorld::mu_, polled without it
  Status status;
  std::vector<std::shared_ptr<PreparedCall>> parts;  // run in order by every rank
  int finished = 0;
};

struct Ticket {
  Op op;
  int rank = 0;
  std::shared_ptr<Assembly> assembly;  // collectives
  Status early;                        // an error found when posting
  // send/recv, guarded by InProcessWorld::p2pMu_
  bool done = false;
  Status status;
};

struct InProcessWorld::Helper {
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<std::shared_ptr<Ticket>, std::function<void(Status)>>> queue;
  bool stop = false;
};

// GPU worlds: one device executor per algorithm and slot layout (a
// built-in runs on LL for small calls and on its own protocol above), only
// ever added to, under its own lock: abort and asyncError reach running
// kernels without waiting for mu_, which a call being enqueued may hold for
// a while.
struct InProcessWorld::Gpu {
  // (algorithm, layout): -1 is the algorithm's own protocol.
  using Key = std::pair<const runtime::VerifiedAlgorithm*, int>;
  std::mutex mu;
  std::map<Key, std::pair<std::shared_ptr<const runtime::VerifiedAlgorithm>,
                          std::unique_ptr<runtime::DeviceExecutor>>>
      executors;
  std::set<const runtime::DeviceExecutor*> ran;  // executors with a call enqueued
  runtime::DeviceExecutor* find(const Key& k) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = executors.find(k);
    return it == executors.end() ? nullptr : it->second.second.get();
  }
  std::vector<runtime::DeviceExecutor*> all() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<runtime::DeviceExecutor*> v;
    for (auto& [va, e] : executors) v.push_back(e.second.get());
    return v;
  }
};

InProcessWorld::InProcessWorld(int nranks, WorldOptions options)
    : n_(nranks),
      options_(options),
      wait_(runtime::WaitPolicy::forRanks(nranks, options.spinUs)),
      nextSeq_(static_cast<size_t>(nranks), 0),
      builtins_(nranks),
      gpu_(std::make_unique<Gpu>()) {}

InProcessWorld::~InProcessWorld() {
  std::lock_guard<std::mutex> lock(helpersMu_);
  for (auto& h : helpers_) {
    if (h == nullptr) continue;
    {
      std::lock_guard<std::mutex> hl(h->mu);
      h->stop = true;
    }
    h->cv.notify_one();
    h->thread.join();
  }
}

bool InProcessWorld::CacheKey::operator<(const CacheKey& o) const {
  return std::tie(va, count, type, op, buffers) < std::tie(o.va, o.count, o.type, o.op, o.buffers);
}

Status InProcessWorld::asyncError() const {
  // Every call's post() asks: no lock unless the world ended (aborted_ is
  // set after error_) or has kernels to ask.
  if (aborted_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(errorMu_);
    return error_;
  }
  if (!onGpu()) return Status::ok();
  // A kernel that stalled or was aborted ends the world as a host error does.
  for (runtime::DeviceExecutor* e : gpu_->all())
    if (Status st = e->asyncError(); !st.isOk()) return st;
  return Status::ok();
}

Status InProcessWorld::synchronize() {
  // Waited for without mu_: an abort or an async-error query from another
  // thread must not queue behind a wait. (Executors are only ever added.)
  std::vector<runtime::DeviceExecutor*> executors = gpu_->all();
  for (runtime::DeviceExecutor* w : executors) CHORUS_RETURN_IF_ERROR(w->waitLaunches());
  std::lock_guard<std::mutex> lock(mu_);  // wait() reads what enqueue() writes
  // errorMu_ across the waits: wait() takes the kernel's error word, and
  // asyncError() must see one or the other, never neither.
  std::lock_guard<std::mutex> el(errorMu_);
  for (runtime::DeviceExecutor* w : executors) {
    if (Status st = w->wait(); !st.isOk()) {
      // A stalled or aborted call ends the world for every rank, as its
      // asyncError says.
      if (error_.isOk()) error_ = st;
      aborted_.store(true, std::memory_order_release);
      return st;
    }
  }
  return Status::ok();
}

void InProcessWorld::abort(Status why) {
  // The error and the kernels first, without mu_: a call being enqueued may
  // hold it while it waits for this world's own last launch (issue 39, B2).
  {
    std::lock_guard<std::mutex> el(errorMu_);
    if (error_.isOk()) error_ = why;
    aborted_.store(true, std::memory_order_release);
  }
  for (runtime::DeviceExecutor* e : gpu_->all()) e->abort();  // running kernels give up
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [va, f] : fabrics_) f->ringAll();
  }
  cv_.notify_all();
  { std::lock_guard<std::mutex> lock(p2pMu_); }
  p2pCv_.notify_all();
}

std::shared_ptr<Ticket> InProcessWorld::post(int rank, Op op) {
  auto t = std::make_shared<Ticket>();
  t->op = std::move(op);
  t->rank = rank;
  if (Status e = asyncError(); !e.isOk()) {
    t->early = e;
    return t;
  }
  if (t->op.kind != Op::Kind::kCollective) {
    if (t->op.peer < 0 || t->op.peer >= n_) {
      t->early =
          Status(StatusCode::kInvalidArgument,
                 "rank " + std::to_string(rank) + ": " + t->op.describe() +
                     ": peer is not a rank of this " + std::to_string(n_) + "-rank communicator");
      return t;
    }
    std::lock_guard<std::mutex> lock(p2pMu_);
    bool isSend = t->op.kind == Op::Kind::kSend;
    std::pair<int, int> key = isSend ? std::pair{rank, t->op.peer} : std::pair{t->op.peer, rank};
    auto& waiting = isSend ? recvs_[key] : sends_[key];
    if (!waiting.empty()) {
      std::shared_ptr<Ticket> other = waiting.front();
      waiting.pop_front();
      if (isSend)
        matchP2p(*t, *other);
      else
        matchP2p(*other, *t);
      p2pCv_.notify_all();
    } else {
      (isSend ? sends_[key] : recvs_[key]).push_back(t);
    }
    return t;
  }
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t seq = nextSeq_[static_cast<size_t>(rank)]++;
  auto& slot = assemblies_[seq];
  if (slot == nullptr) {
    slot = std::make_shared<Assembly>();
    slot->seq = seq;
    slot->ops.resize(static_cast<size_t>(n_));
  }
  slot->ops[static_cast<size_t>(rank)] = t->op;
  t->assembly = slot;
  if (++slot->arrived == n_) {
    resolve(*slot);
    slot->resolved.store(true, std::memory_order_release);
    cv_.notify_all();
  }
  return t;
}

void InProcessWorld::matchP2p(Ticket& send, Ticket& recv) {
  const Op& s = send.op;
  const Op& r = recv.op;
  Status st;
  if (s.args.count != r.args.count || s.args.type != r.args.type) {
    st = Status(StatusCode::kInvalidArgument, "rank " + std::to_string(send.rank) + " " +
                                                  s.describe() + " does not match rank " +
                                                  std::to_string(recv.rank) + " " + r.describe());
  } else if (s.args.count > 0 && (s.args.sendbuff == nullptr || r.args.recvbuff == nullptr)) {
    st = Status(StatusCode::kInvalidArgument, "send/recv with a null buffer");
  } else if (onGpu()) {
    // Device buffers: a copy on the receiver's stream, the sender's stream
    // ordered around it. (A GPU world exists only where a backend does.)
    // (An emulated device's memory is the host's.)
    const runtime::DeviceBackend& gpu = *deviceBackend();
    if (s.args.count > 0 && !gpu.emulated() &&
        (!gpu.isDeviceMemory(s.args.sendbuff) || !gpu.isDeviceMemory(r.args.recvbuff)))
      st = Status(StatusCode::kInvalidArgument,
                  "rank " + std::to_string(send.rank) + " " + s.describe() + " to rank " +
                      std::to_string(recv.rank) +
                      ": a buffer is not device memory, on a GPU communicator");
    else
      st = gpu.copyBetweenStreams(r.args.recvbuff, options_.devices[static_cast<size_t>(recv.rank)],
                                  r.stream, s.args.sendbuff,
                                  options_.devices[static_cast<size_t>(send.rank)], s.stream,
                                  s.args.count * dataTypeSize(s.args.type));
  } else if (s.args.count > 0) {
    std::memmove(r.args.recvbuff, s.args.sendbuff, s.args.count * dataTypeSize(s.args.type));
  }
  send.status = recv.status = st;
  send.done = recv.done = true;
}

Status InProcessWorld::waitP2p(Ticket& t) {
  std::unique_lock<std::mutex> lock(p2pMu_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timeoutMs);
  while (!t.done) {
    if (aborted_.load(std::memory_order_acquire)) return asyncError();
    if (p2pCv_.wait_until(lock, deadline) == std::cv_status::timeout && !t.done) {
      Status st(StatusCode::kTimeout, "rank " + std::to_string(t.rank) + ": " + t.op.describe() +
                                          " found no matching call within " +
                                          std::to_string(options_.timeoutMs / 1000) + " s");
      lock.unlock();
      abort(st);
      return st;
    }
  }
  return t.status;
}

Result<std::shared_ptr<PreparedCall>> InProcessWorld::prepared(
    const std::shared_ptr<const VerifiedAlgorithm>& va, const std::vector<CallArgs>& calls) {
  CacheKey key{va.get(), calls[0].count, calls[0].type, calls[0].op, {}};
  for (const CallArgs& c : calls) key.buffers.emplace_back(c.sendbuff, c.recvbuff);
  auto it = calls_.find(key);
  if (it != calls_.end()) {
    it->second.lastUse = ++useClock_;
    return it->second.call;
  }
  auto& fabric = fabrics_[va.get()];
  auto made = PreparedCall::make(*va, calls, options_.sliceBytes, options_.slots, fabric);
  if (!made.isOk()) return made.status();
  std::shared_ptr<PreparedCall> pc = std::move(made).value();
  fabric = pc->fabric();  // a larger one if the old one's slots were too small
  makeRoom(calls_, pc->bytes(), &cachedBytes_);
  calls_[key] = CacheEntry{va, pc, ++useClock_};
  return pc;
}

Status InProcessWorld::plan(Assembly& a, std::vector<std::string>* why) {
  const Op& op0 = *a.ops[0];
  for (int r = 1; r < n_; ++r) {
    const Op& o = *a.ops[static_cast<size_t>(r)];
    if (o.collective != op0.collective || o.args.count != op0.args.count ||
        o.args.type != op0.args.type || o.args.op != op0.args.op || o.root != op0.root ||
        o.algo != op0.algo) {
      return Status(StatusCode::kInvalidArgument,
                    "collective #" + std::to_string(a.seq) +
                        " does not match across ranks: rank 0 calls " + op0.describe() + ", rank " +
                        std::to_string(r) + " calls " + o.describe());
    }
  }
  std::vector<CallArgs> calls;
  for (const auto& o : a.ops) calls.push_back(o->args);
  runtime::SelectionRequest req;
  req.collective = op0.collective;
  req.nranks = n_;
  req.inplace = runtime::isInPlaceCall(op0.collective, calls[0], 0, n_);
  req.count = op0.args.count;
  req.type = op0.args.type;
  req.op = op0.args.op;
  req.root = op0.root;
  // (What GPU worlds choose differently: runtime/plan/planner.cc's rules.)
  req.sharedMemory = !onGpu();
  req.gpu = onGpu();
  req.gpuLLBytes = options_.gpuLLBytes;
  auto parts = runtime::planParts(req, op0.algo, globalRegistry(), builtins_, why);
  if (!parts.isOk()) return parts.status();
  if (onGpu()) {
    std::vector<void*> streams;
    for (const auto& o : a.ops) streams.push_back(o->stream);
    return enqueueOnGpu(parts.value(), calls, streams);
  }
  for (const runtime::PlanPart& p : parts.value()) {
    std::vector<CallArgs> mine = calls;
    for (CallArgs& c : mine) c = runtime::partArgs(c, p);
    auto pc = prepared(p.va, mine);
    if (!pc.isOk()) return pc.status();
    a.parts.push_back(pc.value());
  }
  return Status::ok();
}

Status InProcessWorld::enqueueOnGpu(const std::vector<runtime::PlanPart>& parts,
                                    const std::vector<CallArgs>& calls,
                                    const std::vector<void*>& streams) {
  const runtime::DeviceBackend* gpu = deviceBackend();
  if (gpu == nullptr) return noDeviceBackend("a GPU communicator was called");
  for (const runtime::PlanPart& p : parts) {
    const int layout = p.protocol == static_cast<int>(p.va->algo().protocol) ? -1 : p.protocol;
    const Gpu::Key key{p.va.get(), layout};
    runtime::DeviceExecutor* executor = gpu_->find(key);
    if (executor == nullptr) {
      runtime::DeviceOptions o = deviceOptions(options_);
      o.protocol = layout;
      auto made = gpu->makeExecutor(*p.va, o);
      if (!made.isOk()) return made.status();
      executor = made.value().get();
      {
        std::lock_guard<std::mutex> lock(gpu_->mu);
        gpu_->executors.emplace(key, std::make_pair(p.va, std::move(made).value()));
      }
      // An abort that listed the executors before this one was added.
      if (aborted_.load(std::memory_order_acquire)) executor->abort();
    }
    std::vector<CallArgs> mine = calls;
    for (CallArgs& c : mine) c = runtime::partArgs(c, p);
    Status st = executor->enqueue(mine, streams);
    bool ran = false;
    {
      std::lock_guard<std::mutex> lock(gpu_->mu);
      ran = gpu_->ran.count(executor) != 0;
      if (st.isOk()) gpu_->ran.insert(executor);
    }
    if (!st.isOk() && !ran && layout != -1 && st.code() == StatusCode::kUnsupported) {
      // A layout's first call makes its connections, which cannot happen
      // while the stream is captured into a CUDA graph; the algorithm's own
      // layout may have them already (a larger call made them). Any layout
      // gives the same result.
      if (runtime::DeviceExecutor* own = gpu_->find({p.va.get(), -1}); own != nullptr)
        if (own->enqueue(mine, streams).isOk()) continue;
    }
    if (!st.isOk()) return st;
  }
  return Status::ok();
}

void InProcessWorld::resolve(Assembly& a) {
  bool info = logEnabled(LogLevel::kInfo);
  std::vector<std::string> why;
  a.status = plan(a, info ? &why : nullptr);
  if (!info) return;
  std::string line = "collective #" + std::to_string(a.seq) + " " + a.ops[0]->describe() + " on " +
                     std::to_string(n_) + " ranks";
  if (!a.status.isOk()) line += ": " + a.status.message();
  for (const std::string& w : why) line += "\n  " + w;
  logLine(LogLevel::kInfo, line);
}

Status InProcessWorld::runCollective(Ticket& t) {
  Assembly& a = *t.assembly;
  // Peers usually arrive within microseconds: poll before paying for a
  // sleep and a wake-up.
  if (!runtime::pollUntil([&] { return a.resolved.load(std::memory_order_acquire); }, wait_)) {
    std::unique_lock<std::mutex> lock(mu_);
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timeoutMs);
    while (!a.resolved.load(std::memory_order_relaxed)) {
      if (Status e = asyncError(); !e.isOk()) return e;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
          !a.resolved.load(std::memory_order_relaxed)) {
        std::string missing;
        for (int r = 0; r < n_; ++r)
          if (!a.ops[static_cast<size_t>(r)]) (missing += ' ') += std::to_string(r);
        Status st(StatusCode::kTimeout, "rank " + std::to_string(t.rank) + ": collective #" +
                                            std::to_string(a.seq) + " " + t.op.describe() +
                                            ": ranks" + missing + " did not call within " +
                                            std::to_string(options_.timeoutMs / 1000) + " s");
        lock.unlock();
        abort(st);
        return st;
      }
    }
  }
  Status st = a.status;
  runtime::RankRunOptions ro;
  ro.wait = wait_;
  ro.timeoutMs = options_.timeoutMs;
  ro.abort = &aborted_;
  for (size_t i = 0; st.isOk() && i < a.parts.size(); ++i) {
    st = a.parts[i]->runRank(t.rank, ro);
    if (st.code() == StatusCode::kTimeout) abort(st);
    if (st.code() == StatusCode::kAborted) {
      // The abort flag ended it: report why (never success; see ProcessWorld::failed).
      Status e = asyncError();
      if (!e.isOk()) st = e;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (++a.finished == n_) assemblies_.erase(a.seq);
  return st;
}

Status InProcessWorld::complete(const std::shared_ptr<Ticket>& t) {
  if (!t->early.isOk()) return t->early;
  if (t->op.kind == Op::Kind::kCollective) return runCollective(*t);
  return waitP2p(*t);
}

void InProcessWorld::dispatch(const std::shared_ptr<Ticket>& t, std::function<void(Status)> done) {
  Helper* h = nullptr;
  {
    std::lock_guard<std::mutex> lock(helpersMu_);
    if (helpers_.empty()) helpers_.resize(static_cast<size_t>(n_));
    auto& slot = helpers_[static_cast<size_t>(t->rank)];
    if (slot == nullptr) {
      slot = std::make_unique<Helper>();
      Helper* raw = slot.get();
      raw->thread = std::thread([this, raw] {
        for (;;) {
          std::unique_lock<std::mutex> hl(raw->mu);
          raw->cv.wait(hl, [raw] { return raw->stop || !raw->queue.empty(); });
          if (raw->queue.empty()) return;  // stop
          auto [ticket, cb] = std::move(raw->queue.front());
          raw->queue.pop_front();
          hl.unlock();
          cb(complete(ticket));
        }
      });
    }
    h = slot.get();
  }
  {
    std::lock_guard<std::mutex> lock(h->mu);
    h->queue.emplace_back(t, std::move(done));
  }
  h->cv.notify_one();
}

}  // namespace chorus::api
