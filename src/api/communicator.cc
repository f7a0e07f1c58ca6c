#include "api/communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <latch>
#include <map>
#include <mutex>
#include <span>
#include <thread>

#include "api/backends.h"
#include "api/staging.h"
#include "chorus/chorus.h"
#include "core/check.h"
#include "core/log.h"
#include "runtime/bootstrap/rendezvous.h"

namespace chorus::api {
namespace {

// A unique id's text (it is NUL-padded).
std::string uniqueIdText(const chorusUniqueId& id) {
  return std::string(id.internal, strnlen(id.internal, sizeof(id.internal)));
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

// A process rank's part of a group: its collectives in order, then its
// sends and receives together.
Status runProcessOps(ProcessWorld* w, std::span<const Op> mine) {
  Status st;
  std::vector<const Op*> sendRecv;
  for (const Op& op : mine) {
    if (op.kind != Op::Kind::kCollective) {
      sendRecv.push_back(&op);
    } else if (Status s = w->collective(op); st.isOk() && !s.isOk()) {
      st = s;
    }
  }
  if (!sendRecv.empty())
    if (Status s = w->pointToPoint(sendRecv); st.isOk() && !s.isOk()) st = s;
  return st;
}

// A group part already done when started (an error, or work that is
// enqueued on a device stream).
class Done final : public Started {
 public:
  explicit Done(Status s) : s_(std::move(s)) {}
  Status wait() override { return s_; }

 private:
  Status s_;
};

// Work run in wait() on this thread (alone), or on a thread of its own
// from start() on, so that the group's other communicators go on.
class Deferred final : public Started {
 public:
  Deferred(std::function<Status()> work, bool onThisThread) : work_(std::move(work)) {
    if (!onThisThread) thread_ = std::thread([this] { result_ = work_(); });
  }
  ~Deferred() override {
    if (thread_.joinable()) thread_.join();
  }
  Status wait() override {
    if (!thread_.joinable()) return work_();
    thread_.join();
    return result_;
  }

 private:
  std::function<Status()> work_;
  std::thread thread_;
  Status result_;
};

// A rank of an in-process world: its ops posted to the world; a lone
// collective runs on this thread, several on the ranks' helper threads
// (one thread may drive many ranks); sends and receives complete after.
class ThreadStarted final : public Started {
 public:
  ThreadStarted(InProcessWorld& world, int rank, std::vector<Op> ops, bool alone) : world_(world) {
    for (Op& op : ops) {
      const bool isColl = op.kind == Op::Kind::kCollective;
      (isColl ? colls_ : p2p_).push_back(world_.post(rank, std::move(op)));
    }
    here_ = alone && colls_.size() == 1;
    if (here_ || colls_.empty()) return;
    results_.resize(colls_.size());
    done_ = std::make_unique<std::latch>(static_cast<std::ptrdiff_t>(colls_.size()));
    for (size_t i = 0; i < colls_.size(); ++i)
      world_.dispatch(colls_[i], [this, i](Status s) {
        results_[i] = std::move(s);
        done_->count_down();
      });
  }
  ~ThreadStarted() override {
    if (done_ != nullptr) done_->wait();  // the helpers write into this
  }
  Status wait() override {
    Status first;
    auto keep = [&first](const Status& s) {
      if (first.isOk() && !s.isOk()) first = s;
    };
    if (here_) keep(world_.complete(colls_.front()));
    if (done_ != nullptr) {
      done_->wait();
      for (const Status& s : results_) keep(s);
    }
    for (const auto& t : p2p_) keep(world_.complete(t));
    return first;
  }

 private:
  InProcessWorld& world_;
  std::vector<std::shared_ptr<Ticket>> colls_, p2p_;
  bool here_ = false;
  std::vector<Status> results_;
  std::unique_ptr<std::latch> done_;
};

// Device memory for root-only buffers a rank left NULL (NCCL lets them be
// anything): a correct algorithm's non-root ranks never need their
// contents, so one buffer, the largest asked for, serves every call;
// smaller ones stay until the end, as calls in flight may still use them.
class RootOnlyPool {
 public:
  RootOnlyPool(const runtime::DeviceBackend* backend, int device)
      : backend_(backend), device_(device) {}
  ~RootOnlyPool() {
    for (void* p : held_) backend_->release(device_, p);
  }
  RootOnlyPool(const RootOnlyPool&) = delete;
  RootOnlyPool& operator=(const RootOnlyPool&) = delete;
  bool empty() const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.empty();
  }
  Result<void*> get(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!held_.empty() && bytes <= bytes_) return held_.back();
    const size_t want = std::max(bytes, 2 * bytes_);
    auto p = backend_->allocate(device_, want);
    if (!p.isOk()) return p.status();
    held_.push_back(p.value());
    bytes_ = want;
    return p.value();
  }

 private:
  const runtime::DeviceBackend* backend_;
  const int device_;
  mutable std::mutex mu_;
  std::vector<void*> held_;  // the last is the largest
  size_t bytes_ = 0;
};

class ThreadRank final : public Communicator {
 public:
  ThreadRank(std::shared_ptr<InProcessWorld> world, int rank)
      : world_(std::move(world)), rank_(rank) {}
  ~ThreadRank() override {
    if (pool_ != nullptr && !pool_->empty()) (void)world_->synchronize();  // calls that use it
  }
  int rank() const override { return rank_; }
  int size() const override { return world_->size(); }
  bool onGpu() const override { return world_->onGpu(); }
  int device() const override {
    return onGpu() ? world_->options().devices[static_cast<size_t>(rank_)] : -1;
  }
  Result<void*> rootOnlyStorage(size_t bytes) override {
    if (!onGpu()) return Communicator::rootOnlyStorage(bytes);
    std::call_once(poolMade_,
                   [&] { pool_ = std::make_unique<RootOnlyPool>(deviceBackend(), device()); });
    return pool_->get(bytes);
  }
  Status asyncError() const override { return world_->asyncError(); }
  void abort(Status why) override { world_->abort(std::move(why)); }
  Status finalize() override { return world_->synchronize(); }
  std::unique_ptr<Started> start(std::vector<Op> ops, bool alone) override {
    return std::make_unique<ThreadStarted>(*world_, rank_, std::move(ops), alone);
  }
  Result<std::shared_ptr<Communicator>> split(int color, int key) override {
    return splitInProcess(color, key, size());
  }
  Result<std::shared_ptr<Communicator>> shrink(const std::vector<int>& survivors,
                                               bool abortFirst) override {
    if (abortFirst)
      world_->abort(Status(StatusCode::kAborted, "rank " + std::to_string(rank_) +
                                                     " shrank the communicator, ending its calls"));
    // Survivors call with color 0 ordered by rank; the others count as none.
    return splitInProcess(0, rank_, static_cast<int>(survivors.size()));
  }

 private:
  Result<std::shared_ptr<Communicator>> splitInProcess(int color, int key, int expected);

  std::shared_ptr<InProcessWorld> world_;
  const int rank_;
  std::once_flag poolMade_;
  std::unique_ptr<RootOnlyPool> pool_;  // GPU ranks' root-only buffers
  uint64_t splits_ = 0;                 // chorusCommSplit calls so far (they pair up by number)
  uint64_t shrinks_ = 0;                // chorusCommShrink calls so far (the survivors' pair up)
};

class ProcessRank : public Communicator {
 public:
  explicit ProcessRank(std::shared_ptr<ProcessWorld> world) : world_(std::move(world)) {}
  int rank() const override { return world_->rank(); }
  int size() const override { return world_->size(); }
  bool onGpu() const override { return false; }
  int device() const override { return -1; }
  Status asyncError() const override { return world_->asyncError(); }
  void abort(Status why) override { world_->abort(std::move(why)); }
  Status finalize() override { return asyncError(); }
  std::unique_ptr<Started> start(std::vector<Op> ops, bool alone) override {
    std::shared_ptr<ProcessWorld> w = world_;
    return std::make_unique<Deferred>(
        [w, ops = std::move(ops)] { return runProcessOps(w.get(), ops); }, alone);
  }
  Status runAlone(Op op) override { return runProcessOps(world_.get(), {&op, 1}); }
  Result<std::shared_ptr<Communicator>> split(int color, int key) override {
    return splitOnHost(color, key, -1);
  }
  Result<std::shared_ptr<Communicator>> shrink(const std::vector<int>& survivors,
                                               bool abortFirst) override {
    if (abortFirst) return shrinkWithAbort();
    return shrinkOnHost(survivors, -1);
  }

 protected:
  static Status shrinkWithAbort() {
    return Status(StatusCode::kUnsupported,
                  "shrink with abort on ranks in several processes: the new communicator's id "
                  "travels over the parent's links, which the abort ends; shrink without it");
  }
  // chorusCommSplit / Shrink over the parent's links; the new ranks on
  // `device` (-1: the host).
  Result<std::shared_ptr<Communicator>> splitOnHost(int color, int key, int device);
  Result<std::shared_ptr<Communicator>> shrinkOnHost(const std::vector<int>& survivors, int device);

  std::shared_ptr<ProcessWorld> world_;
};

// Whether the process ranks of `world` can share connections directly
// (issue 41), decided by all of them at creation, host ranks too (a
// collective: two bootstrap all-gathers). Each GPU rank that could (one
// host, CHORUS_GPU_IPC not 0) makes a small region its peers must map, as
// connections will be; then every rank says whether it mapped every peer's.
// `why` is "" when all can, otherwise the first rank's reason; `gpuSharers`
// counts the ranks on this rank's GPU (its device identity), itself included.
struct DirectVerdict {
  std::string why;
  int gpuSharers = 1;
};
Result<DirectVerdict> directVote(ProcessWorld& world, const runtime::DeviceBackend* backend,
                                 int device) {
  constexpr size_t kProbeBytes = 256;
  const int me = world.rank();
  std::string why;
  std::shared_ptr<runtime::ConnectionExchange> probe;
  std::string handle, identity;
  if (device < 0 || backend == nullptr) {
    why = "it is on the host";
  } else if (!world.options().gpuIpc) {
    why = "CHORUS_GPU_IPC=0";
  } else if (!world.allOnOneHost()) {
    why = "its ranks are on more than one host";
  } else {
    auto ex = backend->processExchange(
        device, me, world.prefix() + "-probe-r" + std::to_string(me), [](const std::string&) {
          return Result<std::vector<std::string>>(std::vector<std::string>());
        });
    auto region = ex.isOk() ? ex.value()->allocate(kProbeBytes) : ex.status();
    auto id = backend->deviceIdentity(device);
    if (!region.isOk()) {
      why = region.status().message();
    } else if (!id.isOk()) {
      why = id.status().message();
    } else {
      probe = ex.value();
      handle = region.value().handle;
      identity = id.value();
    }
  }
  // "ok HANDLE IDENTITY" (both hexadecimal), or "no".
  auto handles =
      world.allGather(why.empty() ? "ok " + runtime::hexHandle(handle) + " " + identity : "no");
  if (!handles.isOk()) return handles.status();
  DirectVerdict verdict;
  verdict.gpuSharers = 0;
  for (int q = 0; q < world.size() && why.empty(); ++q) {
    const std::string& h = handles.value()[static_cast<size_t>(q)];
    std::string bytes;
    if (h.rfind("ok ", 0) != 0) continue;  // (a peer that cannot says why below)
    const size_t space = h.find(' ', 3);
    if (space != std::string::npos && h.substr(space + 1) == identity) ++verdict.gpuSharers;
    if (q == me) continue;
    if (!runtime::unhexHandle(
            h.substr(3, space == std::string::npos ? std::string::npos : space - 3), &bytes)) {
      why = "rank " + std::to_string(q) + "'s probe handle is not hexadecimal";
    } else if (auto mapped = probe->open(q, bytes, kProbeBytes); !mapped.isOk()) {
      why = "cannot map rank " + std::to_string(q) + "'s memory: " + mapped.status().message();
    }
  }
  auto votes = world.allGather(why);
  if (!votes.isOk()) return votes.status();
  for (size_t r = 0; r < votes.value().size(); ++r)
    if (!votes.value()[r].empty()) {
      verdict.why = "rank " + std::to_string(r) + ": " + votes.value()[r];
      break;
    }
  verdict.gpuSharers = std::max(verdict.gpuSharers, 1);
  return verdict;
}

// Collectives of a process rank on a GPU run by its own kernels (issue 41):
// each part's algorithm gets a focus executor of the device backend, whose
// connections are shared with the peers' executors through the backend's
// processExchange (CUDA IPC between the processes of one host; shared
// memory for the step engine), so a call is one launch on the op's stream
// and no host copy. Executors are made in call order, which every rank
// shares, keyed as an in-process GPU world's (algorithm, layout); every
// exchange's blobs carry the executor and exchange number, so ranks out of
// step fail instead of mapping each other's memory for different calls.
// Any failure after planning ends the communicator: the peers hold half a
// call.
class DirectCollectives {
 public:
  DirectCollectives(std::shared_ptr<ProcessWorld> w, const runtime::DeviceBackend& b, int device,
                    int gpuSharers)
      : world_(std::move(w)),
        backend_(b),
        device_(device),
        gpuSharers_(gpuSharers),
        rootOnly_(&b, device) {
    world_->setAbortHook([this] { abortAll(); });
  }
  ~DirectCollectives() {
    world_->setAbortHook({});
    (void)synchronize();  // before the root-only buffers go
  }
  DirectCollectives(const DirectCollectives&) = delete;
  DirectCollectives& operator=(const DirectCollectives&) = delete;
  Status enqueue(const Op& op);
  Status asyncError() const;
  // Waits for the launches so far; the first failure known.
  Status synchronize() const;
  // Device memory for a root-only buffer this rank left NULL.
  Result<void*> rootOnly(size_t bytes) { return rootOnly_.get(bytes); }

 private:
  void abortAll();
  std::vector<runtime::DeviceExecutor*> all() const;
  runtime::DeviceExecutor* find(const runtime::VerifiedAlgorithm* va, int layout) const;
  Result<runtime::DeviceExecutor*> executor(const runtime::PlanPart& p, int layout);

  std::shared_ptr<ProcessWorld> world_;
  const runtime::DeviceBackend& backend_;
  const int device_;
  const int gpuSharers_;  // ranks on this GPU, this one included (DeviceOptions::gpuSharers)
  using Key = std::pair<const runtime::VerifiedAlgorithm*, int>;  // -1: its own layout
  struct Made {
    std::shared_ptr<const runtime::VerifiedAlgorithm> va;
    std::unique_ptr<runtime::DeviceExecutor> executor;
    bool ran = false;  // a call enqueued (its connections made)
  };
  mutable std::mutex mu_;  // executors_ (abortAll runs on other threads)
  std::map<Key, Made> executors_;
  std::atomic<bool> aborted_{false};
  RootOnlyPool rootOnly_;
};

void DirectCollectives::abortAll() {
  aborted_.store(true, std::memory_order_release);
  for (runtime::DeviceExecutor* e : all()) e->abort();  // running kernels give up
}

std::vector<runtime::DeviceExecutor*> DirectCollectives::all() const {
  std::lock_guard<std::mutex> lock(mu_);  // (executors are only ever added)
  std::vector<runtime::DeviceExecutor*> v;
  for (const auto& [key, m] : executors_) v.push_back(m.executor.get());
  return v;
}

runtime::DeviceExecutor* DirectCollectives::find(const runtime::VerifiedAlgorithm* va,
                                                 int layout) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = executors_.find({va, layout});
  return it == executors_.end() ? nullptr : it->second.executor.get();
}

Result<runtime::DeviceExecutor*> DirectCollectives::executor(const runtime::PlanPart& p,
                                                             int layout) {
  if (runtime::DeviceExecutor* e = find(p.va.get(), layout)) return e;
  const int me = world_->rank();
  runtime::DeviceOptions o = deviceOptions(world_->options());
  o.rankDevices.assign(static_cast<size_t>(world_->size()), -1);  // the peers' are theirs
  o.rankDevices[static_cast<size_t>(me)] = device_;
  o.protocol = layout;
  o.focus = me;
  o.gpuSharers = gpuSharers_;
  size_t made = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    made = executors_.size();
  }
  ProcessWorld* w = world_.get();
  auto exchanges = std::make_shared<uint64_t>(0);
  auto tagged = [w, made, exchanges,
                 me](const std::string& blob) -> Result<std::vector<std::string>> {
    const std::string tag =
        "executor " + std::to_string(made) + " exchange " + std::to_string((*exchanges)++) + ";";
    auto all = w->allGather(tag + blob);
    if (!all.isOk()) return all.status();
    for (size_t q = 0; q < all.value().size(); ++q) {
      std::string& theirs = all.value()[q];
      if (theirs.rfind(tag, 0) != 0)
        return Status(StatusCode::kInvalidArgument,
                      "rank " + std::to_string(q) + " is at " +
                          theirs.substr(0, std::min(theirs.find(';'), size_t{48})) + ", rank " +
                          std::to_string(me) + " at " + tag.substr(0, tag.size() - 1) +
                          ": the ranks' calls are out of step");
      theirs.erase(0, tag.size());
    }
    return all;
  };
  auto ex = backend_.processExchange(
      device_, me, world_->prefix() + "-g" + std::to_string(made) + "-r" + std::to_string(me),
      tagged);
  if (!ex.isOk()) return ex.status();
  o.exchange = std::move(ex).value();
  auto e = backend_.makeExecutor(*p.va, o);
  if (!e.isOk()) return e.status();
  runtime::DeviceExecutor* raw = e.value().get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    executors_.emplace(Key{p.va.get(), layout}, Made{p.va, std::move(e).value(), false});
  }
  // An abort that listed the executors before this one was added.
  if (aborted_.load(std::memory_order_acquire)) raw->abort();
  return raw;
}

Status DirectCollectives::enqueue(const Op& op) {
  if (Status e = world_->asyncError(); !e.isOk()) return e;
  // (Planning refuses alike on every rank: nothing has run anywhere.)
  auto parts = world_->planCollective(op, /*gpu=*/true, world_->options().gpuLLBytes);
  if (!parts.isOk()) return parts.status();
  for (const runtime::PlanPart& p : *parts.value()) {
    const int layout = p.protocol == static_cast<int>(p.va->algo().protocol) ? -1 : p.protocol;
    auto e = executor(p, layout);
    if (!e.isOk()) return world_->failed(e.status());
    const runtime::CallArgs mine = runtime::partArgs(op.args, p);
    Status st = e.value()->enqueueRank(mine, op.stream);
    bool ran = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = executors_.find({p.va.get(), layout});
      CHORUS_CHECK(it != executors_.end(), "an executor made for this call");
      ran = it->second.ran;
      it->second.ran = ran || st.isOk();
    }
    if (!st.isOk() && !ran && layout != -1 && st.code() == StatusCode::kUnsupported) {
      // A layout's first call makes its connections, which cannot happen
      // while the stream is captured into a CUDA graph (every rank is
      // refused alike); the algorithm's own layout may have them already.
      if (runtime::DeviceExecutor* own = find(p.va.get(), -1); own != nullptr)
        if (own->enqueueRank(mine, op.stream).isOk()) continue;
    }
    if (!st.isOk()) return world_->failed(st);
  }
  return Status::ok();
}

Status DirectCollectives::asyncError() const {
  for (runtime::DeviceExecutor* e : all())
    if (Status st = e->asyncError(); !st.isOk()) return st;
  return Status::ok();
}

Status DirectCollectives::synchronize() const {
  for (runtime::DeviceExecutor* e : all()) CHORUS_RETURN_IF_ERROR(e->waitLaunches());
  return asyncError();
}

// A process rank on a GPU. With `direct` (ranks on one host), its
// collectives run on its own kernels on connections shared with its peers
// (DirectCollectives); otherwise, and for sends and receives, each group's
// ops are enqueued on their streams as one call staged through host memory
// (runtime::StagedQueue). The process world's host work runs on the queue's
// worker, so splits and shrinks run there too, in order with the calls.
class StagedProcessRank final : public ProcessRank {
 public:
  StagedProcessRank(std::shared_ptr<ProcessWorld> world,
                    std::unique_ptr<runtime::StagedQueue> staged,
                    std::unique_ptr<DirectCollectives> direct)
      : ProcessRank(std::move(world)), staged_(std::move(staged)), direct_(std::move(direct)) {}
  bool onGpu() const override { return true; }
  int device() const override { return staged_->device(); }
  // Staged calls never stage a root-only buffer; kernels take device memory
  // of the communicator's where the caller gave none.
  bool replacesRootOnlyBuffer() const override { return direct_ == nullptr; }
  Result<void*> rootOnlyStorage(size_t bytes) override {
    if (direct_ == nullptr) return ProcessRank::rootOnlyStorage(bytes);
    return direct_->rootOnly(bytes);
  }
  // The process world's error first: a dead peer's, which also aborts the
  // kernels (whose own error then only says they were aborted).
  Status asyncError() const override {
    if (Status st = ProcessRank::asyncError(); !st.isOk()) return st;
    if (Status st = staged_->asyncError(); !st.isOk()) return st;
    if (direct_ != nullptr) return direct_->asyncError();
    return Status::ok();
  }
  Status finalize() override {
    CHORUS_RETURN_IF_ERROR(staged_->synchronize());
    if (direct_ != nullptr) CHORUS_RETURN_IF_ERROR(direct_->synchronize());
    return asyncError();
  }
  void flush() override {
    (void)staged_->synchronize();
    if (direct_ != nullptr) (void)direct_->synchronize();
  }
  std::unique_ptr<Started> start(std::vector<Op> ops, bool) override {
    return std::make_unique<Done>(enqueue(std::move(ops)));
  }
  // Enqueued on the rank's stream, not run here as a host rank's.
  Status runAlone(Op op) override { return Communicator::runAlone(std::move(op)); }
  Result<std::shared_ptr<Communicator>> split(int color, int key) override {
    return onWorker([&](int device) { return splitOnHost(color, key, device); });
  }
  Result<std::shared_ptr<Communicator>> shrink(const std::vector<int>& survivors,
                                               bool abortFirst) override {
    if (abortFirst) return shrinkWithAbort();
    return onWorker([&](int device) { return shrinkOnHost(survivors, device); });
  }

 private:
  Status enqueue(std::vector<Op> ops);
  // `make(device)` on the queue's worker, after the calls enqueued before
  // it (it runs there and this thread waits for it).
  template <class F>
  Result<std::shared_ptr<Communicator>> onWorker(F make) {
    Result<std::shared_ptr<Communicator>> made = std::shared_ptr<Communicator>();
    const int device = staged_->device();
    Status st = staged_->runInOrder([&] {
      made = make(device);
      return made.isOk() ? Status::ok() : made.status();
    });
    if (!st.isOk()) return st;
    return made;
  }

  std::shared_ptr<runtime::StagedQueue> staged_;
  std::unique_ptr<DirectCollectives> direct_;  // null: collectives staged too
};

// `expected`: how many ranks call (all of them for a split; the survivors
// for a shrink, whose left-out ranks count as having no color). Shrinks are
// numbered apart from splits: the left-out ranks make no shrink call.
Result<std::shared_ptr<Communicator>> ThreadRank::splitInProcess(int color, int key, int expected) {
  const InProcessWorld& parent = *world_;
  const int n = parent.size();
  const bool shrinking = expected < n;
  const uint64_t seq = shrinking ? (shrinks_++ | (uint64_t{1} << 63)) : splits_++;
  std::unique_lock<std::mutex> lock(pendingMu);
  auto& slot = splitCalls()[{&parent, seq}];
  if (slot == nullptr) {
    slot = std::make_shared<SplitCall>();
    slot->colorKey.assign(static_cast<size_t>(n), {CHORUS_SPLIT_NOCOLOR, 0});
    slot->worlds.resize(static_cast<size_t>(n));
    slot->newRank.assign(static_cast<size_t>(n), -1);
  }
  std::shared_ptr<SplitCall> call = slot;
  call->colorKey[static_cast<size_t>(rank_)] = {color, key};
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
    Status st(StatusCode::kTimeout, "rank " + std::to_string(rank_) + ": split: only " +
                                        std::to_string(call->arrived) + " of " +
                                        std::to_string(expected) + " ranks called in time");
    call->colorKey[static_cast<size_t>(rank_)] = {CHORUS_SPLIT_NOCOLOR, 0};
    if (--call->arrived == 0) splitCalls().erase({&parent, seq});
    (shrinking ? shrinks_ : splits_) = seq & ~(uint64_t{1} << 63);
    return st;
  }
  lock.unlock();
  auto w = call->worlds[static_cast<size_t>(rank_)];
  if (w == nullptr) return std::shared_ptr<Communicator>();
  return threadRank(w, call->newRank[static_cast<size_t>(rank_)]);
}

// chorusCommSplit for process ranks: colors and keys, then each new
// communicator's unique id (made by its first rank), go round the parent.
Result<std::shared_ptr<Communicator>> ProcessRank::splitOnHost(int color, int key, int device) {
  ProcessWorld& parent = *world_;
  const int n = parent.size();
  std::vector<int64_t> mine{color, key}, all(2 * static_cast<size_t>(n));
  Op op = collectiveOp(CollectiveKind::kAllGather, mine.data(), all.data(), 2);
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
    newRank = static_cast<int>(std::find(it->second.begin(), it->second.end(), rank()) -
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
  Op idOp = collectiveOp(CollectiveKind::kAllGather, &myId, ids.data(), sizeof(myId));
  idOp.args.type = DataType::kUint8;
  CHORUS_RETURN_IF_ERROR(parent.collective(idOp));
  if (it == groups.end()) return std::shared_ptr<Communicator>();
  return joinRank(static_cast<int>(it->second.size()),
                  uniqueIdText(ids[static_cast<size_t>(it->second[0])]), newRank, device);
}

// chorusCommShrink for process ranks: the first survivor makes the new
// communicator's unique id and sends it to the others over the parent's
// point-to-point links (the left-out ranks take no part).
Result<std::shared_ptr<Communicator>> ProcessRank::shrinkOnHost(const std::vector<int>& survivors,
                                                                int device) {
  const int leader = survivors[0];
  const int newRank =
      static_cast<int>(std::find(survivors.begin(), survivors.end(), rank()) - survivors.begin());
  chorusUniqueId id{};
  std::vector<Op> ops;
  if (rank() == leader) {
    auto made = runtime::startRendezvousRoot(world_->options().timeoutMs);
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
  if (!mine.empty()) CHORUS_RETURN_IF_ERROR(world_->pointToPoint(mine));
  return joinRank(static_cast<int>(survivors.size()), uniqueIdText(id), newRank, device);
}

// Enqueues one staged rank's ops of a group as one call: every buffer
// staged through host memory (api/staging.h), the group run by the process
// world on the rank's worker, the ops' streams joined around it (as NCCL's
// group).
Status StagedProcessRank::enqueue(std::vector<Op> ops) {
  if (direct_ != nullptr) {
    // Collectives on the rank's own kernels, in the group's order (every
    // rank's); the sends and receives staged.
    std::vector<Op> rest;
    for (Op& op : ops) {
      if (op.kind != Op::Kind::kCollective) {
        rest.push_back(std::move(op));
      } else if (Status st = direct_->enqueue(op); !st.isOk()) {
        return st;
      }
    }
    if (rest.empty()) return Status::ok();
    ops = std::move(rest);
  }
  std::vector<void*> streams;
  for (const Op& op : ops)
    if (std::find(streams.begin(), streams.end(), op.stream) == streams.end())
      streams.push_back(op.stream);
  StagingPlan plan = planStaging(ops, rank(), size());
  std::vector<StagingPlan::Where> where = plan.where;
  std::shared_ptr<ProcessWorld> w = world_;
  auto run = [w, ops = std::move(ops), where](const std::vector<void*>& host) {
    std::vector<Op> onHost = ops;
    for (size_t i = 0; i < onHost.size(); ++i) {
      auto at = [&](int region, size_t off) {
        return static_cast<unsigned char*>(host[static_cast<size_t>(region)]) + off;
      };
      if (where[i].sendRegion >= 0)
        onHost[i].args.sendbuff = at(where[i].sendRegion, where[i].sendOff);
      if (where[i].recvRegion >= 0)
        onHost[i].args.recvbuff = at(where[i].recvRegion, where[i].recvOff);
      onHost[i].stream = nullptr;
    }
    return runProcessOps(w.get(), onHost);
  };
  return staged_->enqueue(streams, std::move(plan.regions), std::move(run));
}

}  // namespace

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

Op collectiveOp(CollectiveKind k, const void* send, void* recv, size_t count) {
  Op op;
  op.kind = Op::Kind::kCollective;
  op.collective = k;
  op.args.sendbuff = send;
  op.args.recvbuff = recv;
  op.args.count = count;
  return op;
}

Status Communicator::runAlone(Op op) {
  std::vector<Op> one;
  one.push_back(std::move(op));
  return start(std::move(one), true)->wait();
}

Status runGroup(std::vector<std::pair<std::shared_ptr<Communicator>, Op>> ops) {
  std::vector<std::pair<Communicator*, std::vector<Op>>> parts;
  for (auto& [comm, op] : ops) {
    auto it = std::find_if(parts.begin(), parts.end(),
                           [&](const auto& p) { return p.first == comm.get(); });
    if (it == parts.end()) it = parts.insert(parts.end(), {comm.get(), {}});
    it->second.push_back(std::move(op));
  }
  const bool alone = parts.size() == 1;
  std::vector<std::unique_ptr<Started>> started;
  for (auto& [comm, mine] : parts) started.push_back(comm->start(std::move(mine), alone));
  Status first;
  for (auto& s : started)
    if (Status st = s->wait(); first.isOk() && !st.isOk()) first = st;
  return first;
}

std::shared_ptr<Communicator> threadRank(std::shared_ptr<InProcessWorld> world, int rank) {
  return std::make_shared<ThreadRank>(std::move(world), rank);
}

Result<std::shared_ptr<Communicator>> processRank(Result<std::shared_ptr<ProcessWorld>> world,
                                                  int device) {
  if (!world.isOk()) return world.status();
  const runtime::DeviceBackend* gpu = device < 0 ? nullptr : deviceBackend();
  if (device >= 0 && gpu == nullptr) return noDeviceBackend("a device was given");
  // Every rank votes, host ranks too: the vote is collective.
  auto why = directVote(*world.value(), gpu, device);
  if (!why.isOk()) return why.status();
  const DirectVerdict& verdict = why.value();
  if (device < 0)
    return std::shared_ptr<Communicator>(std::make_shared<ProcessRank>(world.value()));
  auto q = gpu->makeStagedQueue(device, world.value()->options().timeoutMs);
  if (!q.isOk()) return q.status();
  const ProcessWorld& w = *world.value();
  std::unique_ptr<DirectCollectives> direct;
  if (verdict.why.empty())
    direct = std::make_unique<DirectCollectives>(world.value(), *gpu, device, verdict.gpuSharers);
  if (logEnabled(LogLevel::kInfo))
    logLine(LogLevel::kInfo,
            "rank " + std::to_string(w.rank()) + " on " + std::string(gpu->name()) + " device " +
                std::to_string(device) + ": " +
                (direct != nullptr
                     ? "collectives run on its own kernels, connections shared with the " +
                           std::to_string(w.size() - 1) + " other processes' (" +
                           std::to_string(verdict.gpuSharers) +
                           " ranks on this GPU; sends and receives staged through host memory)"
                     : "calls staged through host memory (" + verdict.why + ")"));
  return std::shared_ptr<Communicator>(
      std::make_shared<StagedProcessRank>(world.value(), std::move(q).value(), std::move(direct)));
}

Result<std::shared_ptr<Communicator>> joinRank(int nranks, const std::string& id, int rank,
                                               int device) {
  if (id.rfind("chorus-tcp:", 0) == 0) {  // ranks in several processes
    auto config = runtime::decodeRootId(id);
    if (!config.isOk()) return config.status();
    config.value().rank = rank;
    config.value().nranks = nranks;
    return processRank(ProcessWorld::create(config.value(), WorldOptions::fromEnvironment()),
                       device);
  }
  if (id.rfind(runtime::kRendezvousTag, 0) != 0)
    return invalidArgument("the unique id did not come from chorusGetUniqueId");
  WorldOptions options = WorldOptions::fromEnvironment();
  // Meet the other ranks, wherever they are, at the id's root.
  auto met = runtime::meetAtRoot(id, rank, nranks, options.timeoutMs);
  if (!met.isOk()) return met.status();
  if (!met.value().threads) {
    // Ranks in several processes; on GPUs, their calls are staged through
    // host memory (cuda/staged.h).
    if (met.value().listening == nullptr)
      return processRank(ProcessWorld::create(met.value().config, options), device);
    CHORUS_RETURN_IF_ERROR(met.value().listening->accept());
    return processRank(ProcessWorld::create(std::move(met.value().listening), options), device);
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
    return invalidArgument("rank " + std::to_string(rank) + " says nranks " +
                           std::to_string(nranks) + ", an earlier rank said " +
                           std::to_string(mine->nranks));
  if (mine->joined[static_cast<size_t>(rank)])
    return invalidArgument("rank " + std::to_string(rank) + " joined this communicator twice");
  mine->joined[static_cast<size_t>(rank)] = true;
  mine->devices[static_cast<size_t>(rank)] = device;
  if (++mine->count == nranks) {
    pendings().erase(id);
    auto onGpu =
        std::count_if(mine->devices.begin(), mine->devices.end(), [](int d) { return d >= 0; });
    if (onGpu > 0 && onGpu < nranks)
      mine->error = invalidArgument(
          "ranks of one communicator are on GPUs and on the host; pass a device "
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
  return threadRank(mine->world, rank);
}

}  // namespace chorus::api
