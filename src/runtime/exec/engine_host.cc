#include "runtime/exec/engine_host.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <type_traits>

namespace chorus::runtime {

using engine::Block;
using engine::CallView;
using engine::Cursor;
using engine::StepResult;

Result<std::unique_ptr<PlanWorld>> PlanWorld::make(const VerifiedAlgorithm& va,
                                                   const PlanRunOptions& options) {
  if (options.threads < 1) return Status(StatusCode::kInvalidArgument, "threads must be >= 1");
  if (options.slots < 1) return Status(StatusCode::kInvalidArgument, "slots must be >= 1");
  if (options.teamThreads < 1 || options.teamThreads > 1024)
    return Status(StatusCode::kInvalidArgument, "team threads must be in [1, 1024]");
  if (options.instances < 1 || options.instances > kMostInstances)
    return Status(StatusCode::kInvalidArgument,
                  "instances must be in [1, " + std::to_string(kMostInstances) + "]");
  if (options.protocol < -1 || options.protocol > static_cast<int>(ir::Protocol::kLL128))
    return Status(StatusCode::kInvalidArgument, "no protocol " + std::to_string(options.protocol));
  if (options.focus >= va.algo().ngpus || options.focus < -1)
    return Status(StatusCode::kInvalidArgument, "focus " + std::to_string(options.focus) +
                                                    " is not a rank of '" + va.algo().name + "' (" +
                                                    std::to_string(va.algo().ngpus) + " ranks)");
  if (options.focus >= 0 && options.exchange == nullptr)
    return Status(StatusCode::kInvalidArgument, "a focus rank needs a connection exchange");
  std::unique_ptr<PlanWorld> w(new PlanWorld());
  w->va_ = &va;
  w->options_ = options;
  w->plan_ = FlatPlan::lower(va, options.instances);
  w->protocol_ =
      options.protocol >= 0 ? static_cast<ir::Protocol>(options.protocol) : va.algo().protocol;
  const bool all = options.focus < 0;
  w->firstBlock_ = all ? 0 : w->plan_.rankFirstBlock[static_cast<size_t>(options.focus)];
  w->endBlock_ = all ? static_cast<int32_t>(w->plan_.blocks.size())
                     : w->plan_.rankFirstBlock[static_cast<size_t>(options.focus) + 1];
  w->resetCounters();
  return w;
}

Status PlanWorld::allocate(size_t msgBytes) {
  if (msgBytes <= msgBytes_ && !conns_.empty()) return Status::ok();
  msgBytes_ = std::max(msgBytes, msgBytes_);
  if (options_.focus >= 0) {
    // Every rank grows at the same call (the same slices), so the exchange
    // meets; new memory starts every connection afresh on both sides.
    // (msgBytes_ is the slice here.)
    auto views = exchangeConnections(plan_, options_.focus, protocol_, msgBytes_, options_.slots,
                                     *options_.exchange);
    if (!views.isOk()) return views.status();
    conns_ = std::move(views).value();
    return Status::ok();
  }
  size_t slotBytes = engine::slotBytesFor(protocol_, msgBytes_);
  counters_.assign(plan_.conns.size(), engine::ConnCounters{});
  slots_.assign(plan_.conns.size(),
                std::vector<uint64_t>(slotBytes * static_cast<size_t>(options_.slots) / 8, 0));
  conns_.resize(plan_.conns.size());
  for (size_t c = 0; c < conns_.size(); ++c) {
    conns_[c].ctr = &counters_[c];
    conns_[c].slots = reinterpret_cast<unsigned char*>(slots_[c].data());
    conns_[c].slotBytes = slotBytes;
  }
  return Status::ok();
}

Status PlanWorld::run(const std::vector<CallArgs>& calls) {
  if (options_.focus >= 0)
    return Status(StatusCode::kInvalidArgument,
                  "this world runs rank " + std::to_string(options_.focus) + " alone: runRank");
  const VerifiedAlgorithm& va = *va_;
  Result<Geometry> planned = planCall(va, calls, options_.sliceBytes);
  if (!planned.isOk()) return planned.status();
  Geometry g = planned.value();
  plan_.splitSlices(&g);
  if (Status st = allocate(plan_.largestMessageBytes(g)); !st.isOk()) return st;

  auto nranks = static_cast<size_t>(plan_.nranks);
  std::vector<std::vector<unsigned char>> scratch(nranks);
  std::vector<engine::RankView> ranks(nranks);
  for (size_t r = 0; r < nranks; ++r) {
    scratch[r].resize(plan_.scratchBytes(static_cast<int>(r), g));
    ranks[r] = engine::rankView(plan_, static_cast<int>(r), calls[r], scratch[r].data());
  }
  return execute(g, ranks, calls[0].type, calls[0].op);
}

Status PlanWorld::runRank(const CallArgs& call) {
  const int me = options_.focus;
  if (me < 0)
    return Status(StatusCode::kInvalidArgument, "runRank needs a world with a focus rank");
  if (!broken_.isOk()) return broken_;
  // Any failure breaks the world: its peers run the call (or wait at the
  // exchange) without this rank. They hear of it at their next exchange.
  auto fail = [&](const Status& st) {
    broken_ = st;
    options_.exchange->abandon(st);
    return st;
  };
  Result<Geometry> planned = planRankCall(*va_, me, call, options_.sliceBytes);
  if (!planned.isOk()) return fail(planned.status());
  Geometry g = planned.value();
  plan_.splitSlices(&g);
  // Sized by the slice, which every rank computes alike (conn_exchange.h).
  if (Status st = allocate(g.largestSliceBytes()); !st.isOk()) return fail(st);
  std::vector<engine::RankView> ranks(static_cast<size_t>(plan_.nranks));
  std::vector<unsigned char> scratch(plan_.scratchBytes(me, g));
  ranks[static_cast<size_t>(me)] = engine::rankView(plan_, me, call, scratch.data());
  Status st = execute(g, ranks, call.type, call.op);
  if (!st.isOk()) return fail(st);
  return st;
}

Status PlanWorld::execute(const Geometry& g, std::vector<engine::RankView>& ranks, DataType type,
                          ReduceOp op) {
  const VerifiedAlgorithm& va = *va_;
  size_t nblocks = plan_.blocks.size();
  std::vector<engine::BlockPos> positions(nblocks);
  const uint64_t base = engine::stamp(calls_.epoch);

  CallView v;
  v.steps = plan_.steps.data();
  v.blocks = plan_.blocks.data();
  v.rankFirstBlock = plan_.rankFirstBlock.data();
  v.conns = conns_.data();
  v.ranks = ranks.data();
  v.completed = completed_.data();
  v.ranksFinished = ranksFinished_.data();
  v.calls = &calls_;
  v.groupBlocks = endBlock_ - firstBlock_;
  v.positions = positions.data();
  v.g = g;
  v.type = type;
  v.op = op;
  v.protocol = protocol_;
  v.nslots = options_.slots;
  v.instances = plan_.instances;

  // Each thread polls its blocks round-robin until all are finished. One
  // thread: a sweep in which no block moves is a deadlock. Several: no
  // block moving anywhere for stallMs is.
  const auto first = static_cast<size_t>(firstBlock_);
  const auto mineCount = static_cast<size_t>(endBlock_ - firstBlock_);
  auto threads = static_cast<size_t>(std::min<int>(options_.threads, static_cast<int>(mineCount)));
  std::atomic<uint64_t> moves{0};
  std::atomic<bool> stop{false};
  // A team's threads take every decision together: each is a vote (all /
  // any) or follows from the blocks' own, voted, results.
  auto worker = [&](size_t k, auto& ctx) {
    using C = std::remove_reference_t<decltype(ctx)>;
    std::vector<size_t> mine;
    for (size_t b = k; b < mineCount; b += std::max<size_t>(threads, 1)) mine.push_back(first + b);
    std::vector<Cursor> cursors;
    for (size_t b : mine) cursors.push_back(Block<C>(ctx, v, static_cast<int>(b)).start());
    size_t left = mine.size();
    std::vector<uint8_t> over(mine.size(), 0);
    auto lastMove = std::chrono::steady_clock::now();
    uint64_t seen = moves.load();
    while (left > 0 && !ctx.any(stop.load(std::memory_order_relaxed))) {
      bool moved = false;
      for (size_t i = 0; i < mine.size(); ++i) {
        if (over[i]) continue;
        Block<C> blk(ctx, v, static_cast<int>(mine[i]));
        StepResult r;
        while ((r = blk.tryStep(cursors[i])) == StepResult::kRan) moved = true;
        if (r == StepResult::kFinished) {
          blk.finish(cursors[i]);
          over[i] = 1;
          --left;
          moved = true;
        }
      }
      if (moved) {
        moves.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (options_.abort != nullptr && options_.abort->load(std::memory_order_relaxed)) {
        stop.store(true);
        continue;
      }
      // One thread and every rank here: nothing can move any more. (A
      // focus rank waits for peers that run elsewhere: by time.)
      if (threads == 1 && options_.focus < 0) break;
      uint64_t now = moves.load(std::memory_order_relaxed);
      if (now != seen) {
        seen = now;
        lastMove = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - lastMove >
                 std::chrono::milliseconds(options_.stallMs)) {
        stop.store(true);
      }
      std::this_thread::yield();
    }
    for (size_t i = 0; i < mine.size(); ++i)
      if (!over[i]) Block<C>(ctx, v, static_cast<int>(mine[i])).finish(cursors[i]);
  };
  auto team = static_cast<size_t>(options_.teamThreads);
  if (threads <= 1 && team == 1) {
    HostCtx ctx;
    worker(0, ctx);
  } else {
    // `threads` groups, each one thread (HostCtx) or a team of them.
    std::vector<std::unique_ptr<Team>> teams;
    std::vector<std::thread> pool;
    for (size_t k = 0; k < std::max<size_t>(threads, 1); ++k) {
      Team* tm = team > 1 ? teams.emplace_back(std::make_unique<Team>(static_cast<int>(team))).get()
                          : nullptr;
      for (size_t t = 0; t < team; ++t)
        pool.emplace_back([&worker, k, t, tm] {
          if (tm == nullptr) {
            HostCtx ctx;
            worker(k, ctx);
          } else {
            TeamCtx ctx(tm, static_cast<int>(t));
            worker(k, ctx);
          }
        });
    }
    for (auto& t : pool) t.join();
  }
  bool allDone = std::all_of(positions.begin() + firstBlock_, positions.begin() + endBlock_,
                             [](const engine::BlockPos& p) { return p.finished != 0; });
  if (allDone) return Status::ok();
  std::string why = describe(v, base);
  // The connections and counters hold a half-run call: start the next one
  // afresh.
  conns_.clear();
  msgBytes_ = 0;
  resetCounters();
  if (options_.abort != nullptr && options_.abort->load(std::memory_order_relaxed))
    return Status(StatusCode::kAborted,
                  "algorithm '" + va.algo().name + "' was aborted on the step engine:" + why);
  return Status(StatusCode::kDeadlock,
                "algorithm '" + va.algo().name + "' made no progress on the step engine:" + why);
}

void PlanWorld::resetCounters() {
  completed_.assign(plan_.blocks.size(), 0);
  ranksFinished_.assign(static_cast<size_t>(plan_.nranks), 0);
  calls_ = engine::CallCounters{};
}

std::string PlanWorld::describe(const CallView& v, uint64_t base) const {
  std::string out;
  for (auto b = static_cast<size_t>(firstBlock_); b < static_cast<size_t>(endBlock_); ++b) {
    const engine::BlockPos& p = v.positions[b];
    if (p.finished) continue;
    const PlanBlock& pb = plan_.blocks[b];
    const PlanStep& s = plan_.steps[static_cast<size_t>(pb.firstStep + p.pc)];
    std::string wait;
    if (s.depBlock >= 0 &&
        !engine::reached(v.completed[s.depBlock], base,
                         engine::depStepsNeeded(s, p.iter, pb.instance, v.instances))) {
      wait = "tb " + std::to_string(plan_.blocks[static_cast<size_t>(s.depBlock)].tb) + " step " +
             std::to_string(s.depStep);
    } else if (engine::stepReceives(s.type)) {
      const PlanConn& c = plan_.conns[static_cast<size_t>(pb.recvConn)];
      wait = "a message from rank " + std::to_string(c.from) + " on channel " +
             std::to_string(c.channel);
    } else {
      const PlanConn& c = plan_.conns[static_cast<size_t>(pb.sendConn)];
      wait = "a free slot to rank " + std::to_string(c.to) + " on channel " +
             std::to_string(c.channel);
    }
    out += "\n  rank " + std::to_string(pb.rank) + " tb " + std::to_string(pb.tb) +
           (plan_.instances > 1 ? " instance " + std::to_string(pb.instance) : "") + " step " +
           std::to_string(p.pc) + " (" +
           std::string(ir::stepTypeName(static_cast<ir::StepType>(s.type))) + ", iteration " +
           std::to_string(p.iter) + "): waiting for " + wait;
  }
  return out;
}

}  // namespace chorus::runtime
