#include "api/process_world.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>
#include <thread>
#include <tuple>

#include "api/call_cache.h"
#include "core/failpoint.h"
#include "core/log.h"
#include "runtime/exec/p2p.h"

namespace chorus::api {

using runtime::CallArgs;
using runtime::VerifiedAlgorithm;

namespace {
// Sends and receives move in pieces of this size; the pairs' fabric has
// its own id among the algorithms' fabrics (which count up from 0).
constexpr size_t kPointToPointPiece = size_t{64} << 10;
// Shared memory one algorithm's inbound rings may take per rank (they are
// touched when made): 4 GiB over the world's ranks (as if all shared one
// host), between 32 and 512 MiB. Up to 8 ranks, nothing is cut.
size_t ringBudget(int ranks) {
  return std::clamp((size_t{4} << 30) / static_cast<size_t>(std::max(ranks, 1)), size_t{32} << 20,
                    size_t{512} << 20);
}
constexpr uint32_t kPointToPointFabric = 0xffffffffu;
}  // namespace

bool ProcessWorld::Key::operator<(const Key& o) const {
  return std::tie(va, count, type, op, send, recv) <
         std::tie(o.va, o.count, o.type, o.op, o.send, o.recv);
}

Result<std::shared_ptr<ProcessWorld>> ProcessWorld::create(const runtime::BootstrapConfig& config,
                                                           WorldOptions options) {
  runtime::BootstrapConfig c = config;
  c.timeoutMs = options.timeoutMs;
  auto boot = runtime::Bootstrap::connect(c);
  if (!boot.isOk()) return boot.status();
  return create(std::move(boot).value(), options);
}

Result<std::shared_ptr<ProcessWorld>> ProcessWorld::create(std::unique_ptr<runtime::Bootstrap> boot,
                                                           WorldOptions options) {
  std::shared_ptr<ProcessWorld> w(new ProcessWorld(boot->nranks(), boot->rank(), options));
  w->boot_ = std::move(boot);
  // The settings that shape connections must agree (a ring mapped with
  // another slot size would be nonsense; a peer forced onto TCP must say so
  // too).
  // (LL's threshold and the instances decide GPU ranks' executors and when
  // they exchange connections.)
  std::string mine = "CHORUS_TRANSPORT=" + options.transport;
  mine.append(" CHORUS_SLICE_BYTES=").append(std::to_string(options.sliceBytes));
  mine.append(" CHORUS_GPU_LL_BYTES=").append(std::to_string(options.gpuLLBytes));
  mine.append(" CHORUS_INSTANCES=").append(std::to_string(options.instances));
  auto theirs = w->boot_->allGather(mine);
  if (!theirs.isOk()) return theirs.status();
  for (int r = 0; r < w->n_; ++r)
    if (theirs.value()[static_cast<size_t>(r)] != mine)
      return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(r) + " has " +
                                                      theirs.value()[static_cast<size_t>(r)] +
                                                      ", rank " + std::to_string(w->me_) + " has " +
                                                      mine + "; all ranks must agree");
  const auto& hosts = w->boot_->hosts();
  // Ranks that share this host's cores decide how a blocked rank waits.
  w->wait_ = runtime::WaitPolicy::forRanks(
      static_cast<int>(std::count(hosts.begin(), hosts.end(), hosts[static_cast<size_t>(w->me_)])),
      options.spinUs);
  // Rank 0 names the communicator's segments; everyone uses its name. Under
  // `chorus launch` the name starts with the job's id, so the launcher can
  // remove what a killed job could not.
  std::random_device rd;
  std::string name = "/";
  if (!options.jobId.empty())
    name.append(options.jobId);
  else
    name.append("chorus-").append(std::to_string(::getpid()));
  name.append("-").append(std::to_string(rd()));
  auto names = w->boot_->allGather(name);
  if (!names.isOk()) return names.status();
  w->prefix_ = names.value()[0];
  // A set-up step that fails because a peer went away says which, and the
  // others hear of it now (found by bench/fault_inject.sh: "cannot open
  // shared-memory segment ...-bell-1" when rank 0 had died).
  auto setupFailed = [&w](const Status& st) {
    std::string news = w->boot_->newsOfPeers();
    Status out = news.empty() ? st : Status(st.code(), st.message() + " (meanwhile " + news + ")");
    w->boot_->goodbye(out.message());
    return out;
  };
  // How to reach each peer (runtime/transport/network.h): shared memory on this host,
  // TCP elsewhere, or as CHORUS_TRANSPORT says. A peer that dies ends the
  // communicator at once (not after the timeout).
  ProcessWorld* raw = w.get();
  runtime::NetworkOptions no;
  no.transport = options.transport;
  no.crossMemoryAttach = options.crossMemoryAttach;
  no.tcpSockets = options.tcpSockets;
  no.timeoutMs = options.timeoutMs;
  auto net = runtime::Network::create(
      *w->boot_, w->prefix_, no,
      [raw](int, const std::string& why) { raw->abort(Status(StatusCode::kAborted, why)); });
  if (!net.isOk()) return setupFailed(net.status());
  w->net_ = std::move(net).value();
  w->netAwake_.store(w->net_.get(), std::memory_order_release);
  w->sharedMemory_ = w->net_->allPairsUse("shm");
  if (logEnabled(LogLevel::kInfo))
    logLine(LogLevel::kInfo, w->net_->describe(hosts[static_cast<size_t>(w->me_)]));
  // Sends and receives get connections between every pair now: a pair may
  // start talking at any time, without the other ranks.
  auto p2p = runtime::ProcessFabric::create(runtime::ProcessFabric::allPairs(w->n_, w->me_), w->me_,
                                            kPointToPointPiece, options.slots, w->prefix_ + "-p2p",
                                            kPointToPointFabric, *w->boot_, *w->net_);
  if (!p2p.isOk()) return setupFailed(p2p.status());
  w->p2p_ = std::move(p2p).value();
  w->boot_->startMonitor([raw](int rank, const std::string& why) {
    (void)rank;  // named in `why`
    raw->abort(Status(StatusCode::kAborted, why));
  });
  return w;
}

ProcessWorld::~ProcessWorld() {
  (void)failpoint("shutdown");  // fault injection (core/failpoint.h)
  // First the TCP progress thread and the bootstrap: they say goodbye and
  // stop the threads that may otherwise still call abort() on members being
  // destroyed. Connections go before the links they are enrolled in.
  if (net_ != nullptr) net_->shutdown();
  // A rank whose communicator failed says so as it leaves: peers still in a
  // call with it fail now, not after the timeout.
  Status e = asyncError();
  if (boot_ != nullptr) boot_->goodbye(e.isOk() ? std::string() : e.message());
  boot_.reset();
  calls_.clear();
  fabrics_.clear();
  p2p_.reset();
  netAwake_.store(nullptr, std::memory_order_release);
  net_.reset();
}

Status ProcessWorld::asyncError() const {
  if (!aborted_.load(std::memory_order_acquire)) return Status::ok();  // set after error_
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void ProcessWorld::abort(Status why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.isOk())
      error_ = why;
    else if (why.message() != error_.message() && reports_.size() < 8)
      reports_.push_back(why.message());
  }
  aborted_.store(true, std::memory_order_release);
  // Wake the rank wherever it sleeps: its doorbell, its sockets. (Not net_:
  // a transport may report a loss while the network is being created and
  // assigned.)
  if (runtime::Network* n = netAwake_.load(std::memory_order_acquire)) n->interrupt();
  std::lock_guard<std::mutex> lock(hookMu_);
  if (abortHook_) abortHook_();  // its kernels, wherever they wait
}

void ProcessWorld::setAbortHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(hookMu_);
  abortHook_ = std::move(hook);
}

Result<std::vector<std::string>> ProcessWorld::allGather(const std::string& mine) {
  std::lock_guard<std::mutex> lock(bootMu_);
  return boot_->allGather(mine);
}

bool ProcessWorld::allOnOneHost() const {
  const auto& hosts = boot_->hosts();
  return std::all_of(hosts.begin(), hosts.end(),
                     [&](const std::string& h) { return h == hosts[0]; });
}

namespace {

// A failure that is, or passes on, a rank's timeout.
bool aboutATimeout(const Status& st) {
  return st.message().find("no progress for") != std::string::npos ||
         st.message().find("did not answer") != std::string::npos;
}

}  // namespace

Status ProcessWorld::failed(Status st) {
  if (st.isOk()) return st;
  Status peer = asyncError();
  if (st.code() == StatusCode::kAborted && !peer.isOk()) {
    // Another rank's failure ended the call (the abort flag); what this one
    // was waiting for may point further (the rank that stopped), and so may
    // what the other ranks that timed out report meanwhile.
    size_t nl = st.message().find('\n');
    std::string msg =
        peer.message() +
        (nl == std::string::npos ? "" : "\n  this rank was waiting:" + st.message().substr(nl));
    boot_->goodbye(msg);  // a rank that timed out hears whom this one waited for
    if (aboutATimeout(peer)) msg += heardMeanwhile(peer);
    return Status(peer.code(), msg);
  }
  // Its own failure (kAborted too: a peer's memory that cannot be read
  // because the peer is gone). Never reported as success, whatever the
  // monitor has or has not noticed yet (found by bench/fault_inject.sh).
  abort(st);
  // The others hear of it now, not when this communicator is destroyed.
  boot_->goodbye(st.message());
  // After a timeout, the rank we waited for may itself have waited for
  // another: hear what the others say, so the message leads to the rank
  // that stopped (docs/testing.md "Fault injection").
  if (st.code() != StatusCode::kTimeout && !aboutATimeout(st)) return st;
  return Status(st.code(), st.message() + heardMeanwhile(st));
}

std::string ProcessWorld::heardMeanwhile(const Status& first) {
  // Ranks that time out together report within moments of each other.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<std::string> heard;
  {
    std::lock_guard<std::mutex> lock(mu_);
    heard = reports_;
    // A report may have ended the communicator before this rank's own
    // failure did (it is then the first error, not one of the reports).
    heard.insert(heard.begin(), error_.message());
  }
  std::string out;
  bool any = false;
  for (const std::string& h : heard) {
    // Not an echo of `first` passed on by others ("rank 3 left after an
    // error: <first>").
    std::string_view core = h;
    for (size_t at; (at = core.find(" left after an error: ")) != std::string_view::npos &&
                    core.substr(0, 5) == "rank " && at < 16;)
      core.remove_prefix(at + 22);
    if (h != first.message()) any = true;
    if (core != first.message() && h != first.message()) out += "\n  meanwhile: " + h;
  }
  // Reports reach this rank through its parent in the bootstrap (rank 0 in
  // the star); a failure of this rank is answered by the others' within
  // moments, unless the parent passes nothing on.
  if (!any && me_ != 0) {
    const std::string parent = "rank " + std::to_string(boot_->parent());
    out += boot_->parentLeft()
               ? "\n  (" + parent + " has left, so the other ranks' reports do not reach this one)"
               : "\n  meanwhile: nothing from " + parent +
                     ", which passes reports on: it may have stopped";
  }
  return out;
}

Status ProcessWorld::barrier() {
  if (Status e = asyncError(); !e.isOk()) return e;
  Status st = boot_->barrier();
  if (!st.isOk()) abort(st);
  return st;
}

Result<runtime::RankCall*> ProcessWorld::rankCall(
    const std::shared_ptr<const VerifiedAlgorithm>& va, const CallArgs& args) {
  Key key{va.get(), args.count, args.type, args.op, args.sendbuff, args.recvbuff};
  FabricSlot& slot = fabrics_[va.get()];
  slot.lastUse = ++fabricClock_;
  auto it = calls_.find(key);
  if (it != calls_.end()) {
    // A call made on an algorithm's earlier fabric is made again on its
    // current one: a peer that evicted the call makes it on the current
    // fabric, and both ends of a ring must be on the same one.
    if (it->second.fabric == slot.fabric.get()) {
      it->second.lastUse = ++useClock_;
      return it->second.call.get();
    }
    cachedBytes_ -= it->second.call->bytes();
    calls_.erase(it);
  }
  // The slice this call wants: a chunk of it (at least the fabric's least
  // unit), at most what the algorithm's rings may hold (slot.most). Rings
  // are made for the calls that come, not for the largest one an
  // algorithm could see: a 1 KiB alltoall on 64 processes had 63 rings of
  // 8 x 16 KiB per rank, touched when made (4 GiB on the host).
  auto want = [&] {
    if (options_.sliceBytes != 0) return options_.sliceBytes;
    const ir::Algorithm& a = va->algo();
    size_t chunk = args.count * runtime::countMultiplier(a) /
                   static_cast<size_t>(std::max(a.nchunksPerLoop, 1)) * dataTypeSize(args.type);
    // An algorithm made for slices of its own (ir::Algorithm::sliceBytes)
    // pipelines by them: a slice no larger.
    if (a.sliceBytes > 0) chunk = std::min<size_t>(chunk, a.sliceBytes);
    return std::min(slot.most, std::bit_ceil(std::max(chunk, runtime::ProcessFabric::kMinUnit)));
  };
  if (slot.fabric == nullptr || slot.fabric->unitBytes() < want()) {
    std::lock_guard<std::mutex> lock(bootMu_);  // the bootstrap's collectives
    // Collective: every rank gets here for the same algorithm at the same
    // point of the same call sequence, with the same count (so the same
    // wish). The connections are this rank's own (a part knows no others).
    runtime::ProcessFabric::Links links = runtime::Fabric::rankMessages(va->algo(), me_);
    if (slot.most == 0) {
      // The most: the protocol's slice, cut so that no rank's inbound
      // rings of this algorithm take more than ringBudget() (a direct
      // alltoall on 64 processes would otherwise touch 63 x 8 x 2 MiB per
      // rank). Each rank knows its own rings: they agree on the largest.
      auto inbound = boot_->allGather(
          std::to_string(runtime::ProcessFabric::inboundUnits(links, me_, options_.slots)));
      if (!inbound.isOk()) {
        fabrics_.erase(va.get());
        return inbound.status();
      }
      size_t most = 0;
      for (const std::string& u : inbound.value()) most = std::max<size_t>(most, std::stoull(u));
      slot.inbound = most;
      // Nor more than a quarter of the pool (FabricSlot::bytes counts
      // twice the inbound rings): the few algorithms a loop alternates
      // (an FSDP step's allgather, reduce-scatter and allreduce) keep
      // theirs, instead of each releasing the others' at every call (a
      // 4-process direct reduce-scatter of 8 MiB took 7 ms a call, its
      // rings remade each time, 0.5-0.8 ms with room).
      slot.most = runtime::ProcessFabric::unitWithin(most, ir::sliceBytesOf(va->algo()),
                                                     std::min(ringBudget(n_), ringPoolBytes() / 8));
    }
    // The pool: room for these rings first (the old ones, when they grow,
    // go with the calls made on them).
    if (slot.fabric != nullptr) {
      dropCalls(slot.fabric.get());
      slot.fabric.reset();
    }
    releaseRings(slot.bytes(want()));
    const uint32_t id = nextFabric_++;
    auto f = runtime::ProcessFabric::create(links, me_, want(), options_.slots,
                                            prefix_ + "-f" + std::to_string(id), id, *boot_, *net_);
    if (!f.isOk()) {
      fabrics_.erase(va.get());  // a failed make ends the communicator (collective())
      return f.status();
    }
    slot.fabric = f.value();
  }
  const std::shared_ptr<runtime::ProcessFabric>& fabric = slot.fabric;
  const size_t unit = fabric->unitBytes();
  auto rc = runtime::RankCall::make(*va, me_, args, unit, fabric);
  if (!rc.isOk()) return rc.status();
  makeRoom(calls_, rc.value()->bytes(), &cachedBytes_);
  runtime::RankCall* raw = rc.value().get();
  calls_[key] = Entry{va, std::move(rc).value(), ++useClock_, fabric.get()};
  return raw;
}

void ProcessWorld::dropCalls(const runtime::ProcessFabric* fabric) {
  for (auto it = calls_.begin(); it != calls_.end();) {
    if (it->second.fabric == fabric) {
      cachedBytes_ -= it->second.call->bytes();
      it = calls_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t ProcessWorld::ringPoolBytes() const {
  return options_.ringBytesPerPeer * static_cast<size_t>(std::max(n_ - 1, 1));
}

void ProcessWorld::releaseRings(size_t need) {
  const size_t budget = ringPoolBytes();
  size_t held = 0;
  for (const auto& [algo, slot] : fabrics_)
    if (slot.fabric != nullptr) held += slot.bytes(slot.fabric->unitBytes());
  // Every rank holds the same algorithms' rings, used in the same order
  // (collectives: the same calls in the same order), so every rank
  // releases the same ones here; each remakes them, collectively, at the
  // same later call that needs them again.
  while (held + need > budget) {
    FabricSlot* oldest = nullptr;
    for (auto& entry : fabrics_) {
      FabricSlot& slot = entry.second;
      if (slot.fabric != nullptr && (oldest == nullptr || slot.lastUse < oldest->lastUse))
        oldest = &slot;
    }
    if (oldest == nullptr) return;  // none left: the new rings are made whatever their size
    held -= oldest->bytes(oldest->fabric->unitBytes());
    dropCalls(oldest->fabric.get());
    oldest->fabric.reset();
  }
}

namespace {

bool sameRequest(const runtime::SelectionRequest& a, const runtime::SelectionRequest& b) {
  return a.collective == b.collective && a.nranks == b.nranks && a.inplace == b.inplace &&
         a.count == b.count && a.type == b.type && a.op == b.op && a.root == b.root &&
         a.sharedMemory == b.sharedMemory && a.gpu == b.gpu && a.gpuLLBytes == b.gpuLLBytes &&
         a.focus == b.focus;
}

}  // namespace

Result<const std::vector<runtime::PlanPart>*> ProcessWorld::planCollective(const Op& op, bool gpu,
                                                                           size_t gpuLLBytes) {
  runtime::SelectionRequest req;
  req.collective = op.collective;
  req.nranks = n_;
  req.inplace = runtime::isInPlaceCall(op.collective, op.args, me_, n_);
  req.count = op.args.count;
  req.type = op.args.type;
  req.op = op.args.op;
  req.root = op.root;
  req.sharedMemory = sharedMemory_ && !gpu;
  req.gpu = gpu;
  if (gpu) req.gpuLLBytes = gpuLLBytes;
  req.focus = me_;  // a program file past CHORUS_PROVE_RANKS: this rank's part
  bool info = logEnabled(LogLevel::kInfo);
  // The same call as the last one (a training loop's): the same plan, without
  // selection (its candidates change only when a file is registered).
  const size_t candidates = globalRegistry().size();
  const bool again = !info && last_.has_value() && sameRequest(last_->req, req) &&
                     last_->algo == op.algo.get() && last_->candidates == candidates;
  std::vector<std::string> why;
  Status planned;
  if (!again) {
    auto parts =
        runtime::planParts(req, op.algo, globalRegistry(), builtins_, info ? &why : nullptr);
    if (parts.isOk())
      last_ = LastPlan{req, op.algo.get(), candidates, std::move(parts).value()};
    else
      planned = parts.status();
  }
  if (info) {
    std::string line = "rank " + std::to_string(me_) + " collective #" + std::to_string(seq_) +
                       " " + op.describe() + " on " + std::to_string(n_) + " processes" +
                       (gpu ? " (on GPUs, each its own kernels)" : "");
    if (!planned.isOk()) line += ": " + planned.message();
    for (const std::string& w : why) line += "\n  " + w;
    logLine(LogLevel::kInfo, line);
  }
  ++seq_;
  if (!planned.isOk()) return planned;
  return &last_->parts;
}

Status ProcessWorld::collective(const Op& op) {
  if (Status e = asyncError(); !e.isOk()) return e;
  if (op.kind != Op::Kind::kCollective) return pointToPoint({&op});
  auto parts = planCollective(op, /*gpu=*/false, 0);
  if (!parts.isOk()) return parts.status();
  const runtime::RankRunOptions ro = runOptions();
  for (const runtime::PlanPart& p : *parts.value()) {
    auto rc = rankCall(p.va, runtime::partArgs(op.args, p));
    if (!rc.isOk()) {
      // Making a fabric is collective: failing in it (a peer gone, silent
      // or unreachable) ends the communicator, as a failed step does.
      if (rc.status().code() == StatusCode::kTimeout ||
          rc.status().code() == StatusCode::kIoError || rc.status().code() == StatusCode::kAborted)
        return failed(rc.status());
      return rc.status();
    }
    // A call that failed half way leaves messages in the rings: the
    // communicator cannot be used again.
    Status st = failed(rc.value()->run(ro));
    if (!st.isOk()) return st;
  }
  return Status::ok();
}

runtime::RankRunOptions ProcessWorld::runOptions() {
  runtime::RankRunOptions ro;
  ro.wait = wait_;
  ro.timeoutMs = options_.timeoutMs;
  ro.abort = &aborted_;
  ro.poller = net_->poller();  // the rank drives its sockets while it waits
  return ro;
}

Status ProcessWorld::pointToPoint(const std::vector<const Op*>& ops) {
  if (Status e = asyncError(); !e.isOk()) return e;
  runtime::P2pExchange x(*p2p_, me_, kPointToPointPiece);
  std::vector<const Op*> selfSends, selfRecvs;
  for (const Op* op : ops) {
    if (op->peer < 0 || op->peer >= n_)
      return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(me_) + ": peer " +
                                                      std::to_string(op->peer) + " is not in [0, " +
                                                      std::to_string(n_) + ")");
    size_t bytes = op->args.count * dataTypeSize(op->args.type);
    bool send = op->kind == Op::Kind::kSend;
    if (op->peer == me_) {
      (send ? selfSends : selfRecvs).push_back(op);
      continue;
    }
    CHORUS_RETURN_IF_ERROR(send ? x.addSend(op->peer, op->args.sendbuff, bytes)
                                : x.addRecv(op->peer, op->args.recvbuff, bytes));
  }
  // To itself: the k-th send meets the k-th receive of the group.
  if (selfSends.size() != selfRecvs.size())
    return Status(StatusCode::kInvalidArgument,
                  "rank " + std::to_string(me_) + " sends to itself " +
                      std::to_string(selfSends.size()) + " time(s) and receives from itself " +
                      std::to_string(selfRecvs.size()) + " time(s) in one group");
  for (size_t i = 0; i < selfSends.size(); ++i) {
    size_t s = selfSends[i]->args.count * dataTypeSize(selfSends[i]->args.type);
    size_t r = selfRecvs[i]->args.count * dataTypeSize(selfRecvs[i]->args.type);
    if (s != r)
      return Status(StatusCode::kInvalidArgument,
                    "rank " + std::to_string(me_) + ": a send to itself of " + std::to_string(s) +
                        " bytes meets a receive of " + std::to_string(r) + " bytes");
    if (s != 0) std::memmove(selfRecvs[i]->args.recvbuff, selfSends[i]->args.sendbuff, s);
  }
  const runtime::RankRunOptions ro = runOptions();
  Status st = runtime::runRankLoop(x, net_->bells().bell(me_), me_, ro);
  // Messages half moved stay in the rings: the communicator cannot go on.
  return failed(st);
}

}  // namespace chorus::api
