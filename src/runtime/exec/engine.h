// The step engine: runs one block (an IR threadblock of one rank) of a
// FlatPlan, written once for two machines. On a GPU a CUDA block runs it
// with all its threads (src/cuda); on the host a thread stands in for the
// block (engine_host.h), which is how CI runs this very code on every
// production file and DSL program without a GPU.
//
// A `Ctx` says what a block is: its threads (tid, nthreads), a block-wide
// barrier and vote (sync, all, any), and loads and stores of 64-bit words
// with acquire / release / relaxed order. Counters are polled and
// published by thread 0 alone, around a barrier (tryStep says why that
// orders every thread's accesses). The engine is a
// non-blocking state machine: tryStep() runs the block's next step if it
// can and otherwise says it is blocked, so a driver can poll many blocks
// from one thread, and a GPU block can give up on an abort or a timeout.
//
// Semantics are the CPU executor's (executor.h): the same chunk and slice
// geometry (ir/slicing.h), one slice iteration after another, a step's
// dependency met when its block has completed stepsNeeded() steps, every
// instruction of docs/spec/IR.md section 2, avg divided at the end of the call (by
// the rank's last block to finish, not by a host pass).
//
// Instances (FlatPlan::lower): a plan may run each IR threadblock as K
// blocks, instance i running slice iterations i, i + K, ... over
// connections of its own, so K blocks share a threadblock's data.
//
// Connections: a ring of `nslots` slots per (channel, sender, receiver),
// with two counters, `head` (messages the sender has published) and `tail`
// (messages the receiver has consumed). A sender may write slot
// head % nslots once head - tail < nslots. The three protocols differ in
// how a message shows it has arrived:
//   Simple  the payload as is; the block's threads write it, a barrier,
//           then thread 0 stores head with release order; the receiver's
//           thread 0 loads head with acquire order, then a barrier, then
//           the threads read.
//   LL      8-byte lines, 4 payload bytes and a 4-byte flag written by one
//           64-bit store, so data and flag arrive together: the receiver
//           polls the lines' flags and needs no separate signal. The flag
//           is the message's sequence number, so slots are never cleared.
//   LL128   128-byte lines, 120 payload bytes and an 8-byte flag stored
//           with release order after a barrier that follows the block's
//           payload stores; the reader acquires the flags, then the payload.
//   A step on LL or LL128 reads its message from the lines, combines it
//   and writes its destination and its outgoing lines in one pass, with no
//   staging copy (lines.h).
// A receiver frees its slot by storing tail (release) after reading it;
// the sender loads tail (acquire) before reusing the slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/elementwise.h"
#include "core/hd.h"
#include "core/types.h"
#include "ir/slicing.h"
#include "runtime/exec/flat_plan.h"
#include "runtime/exec/lines.h"
#include "runtime/exec/reduce_copy.h"

namespace chorus::runtime::engine {

// IR enums as the plan's bytes.
enum : uint8_t {
  kSend = static_cast<uint8_t>(ir::StepType::kSend),
  kRecv = static_cast<uint8_t>(ir::StepType::kRecv),
  kRecvCopySend = static_cast<uint8_t>(ir::StepType::kRecvCopySend),
  kRecvReduceSend = static_cast<uint8_t>(ir::StepType::kRecvReduceSend),
  kRecvReduceCopy = static_cast<uint8_t>(ir::StepType::kRecvReduceCopy),
  kRecvReduceCopySend = static_cast<uint8_t>(ir::StepType::kRecvReduceCopySend),
  kCopy = static_cast<uint8_t>(ir::StepType::kCopy),
  kReduce = static_cast<uint8_t>(ir::StepType::kReduce),
  kNop = static_cast<uint8_t>(ir::StepType::kNop),
};

CHORUS_HD_INLINE bool stepSends(uint8_t t) {
  return t == kSend || t == kRecvCopySend || t == kRecvReduceSend || t == kRecvReduceCopySend;
}
CHORUS_HD_INLINE bool stepReceives(uint8_t t) {
  return t == kRecv || t == kRecvCopySend || t == kRecvReduceSend || t == kRecvReduceCopy ||
         t == kRecvReduceCopySend;
}

// Bytes of one slot that carries messages of up to `msgBytes`.
CHORUS_HD_INLINE size_t slotBytesFor(ir::Protocol p, size_t msgBytes) {
  switch (p) {
    case ir::Protocol::kLL:
      return ln::lineCount(p, msgBytes) * ln::kLLLine;
    case ir::Protocol::kLL128:
      return ln::lineCount(p, msgBytes) * ln::kLL128Line;
    case ir::Protocol::kSimple:
      break;
  }
  return (msgBytes + 15) / 16 * 16;
}

// The counters of one connection, each on its own 128-byte line (the
// sender writes head, the receiver tail).
struct ConnCounters {
  alignas(128) uint64_t head;
  alignas(128) uint64_t tail;
};

struct ConnView {
  ConnCounters* ctr = nullptr;
  unsigned char* slots = nullptr;  // nslots x slotBytes, in the receiver's memory
  size_t slotBytes = 0;
};

struct RankView {
  unsigned char* base[ir::kNumBuffers] = {nullptr, nullptr, nullptr};  // input, output, scratch
  size_t outElems = 0;  // output elements (avg divides them)
  int divisor = 0;      // avg: divide the output by this at the end; 0: no
};

// Rank `rank`'s buffers for one call of `plan` (host code: the host and
// CUDA worlds build the views they pass to blocks with it).
inline RankView rankView(const FlatPlan& plan, int rank, const CallArgs& call,
                         unsigned char* scratch) {
  RankView rv;
  // Out-of-place algorithms never write their input (the verifier's E304).
  rv.base[0] = const_cast<unsigned char*>(static_cast<const unsigned char*>(call.sendbuff));
  rv.base[1] = static_cast<unsigned char*>(call.recvbuff);
  rv.base[2] = scratch;
  rv.outElems = bufferElems(plan.collective, plan.nranks, call.count).second;
  rv.divisor = plan.dividesOutput(rank, call.op) && plan.nranks > 1 ? plan.nranks : 0;
  return rv;
}

// Where a block stopped (for reports after an abort or a timeout).
struct BlockPos {
  uint64_t iter = 0;
  int32_t pc = 0;
  int32_t finished = 0;
};

// The blocks launched together (one GPU's, or the host's) count their
// calls, so that nothing is zeroed between calls: `epoch` is the number of
// calls every block of the group has finished, `finished` the blocks done
// with this one (the last resets it and advances the epoch). A stopped
// call leaves them mid-way; the world zeroes them with its connections.
struct CallCounters {
  alignas(128) uint64_t epoch;
  alignas(128) uint32_t finished;
};

// A block's steps completed in a call, stamped with the call: the epoch's
// low 64 - kDoneBits bits above the count, so a count left by an earlier
// call never meets a dependency of this one (consecutive epochs differ
// even as they wrap; a block with no iterations in a call stamps its
// counter anyway, so no count is older than the last call).
inline constexpr int kDoneBits = 40;
inline constexpr uint64_t kDoneMask = (uint64_t{1} << kDoneBits) - 1;
CHORUS_HD_INLINE uint64_t stamp(uint64_t epoch) { return epoch << kDoneBits; }
// Whether a block whose counter reads `completed` has completed `need`
// steps of the call stamped `base`.
CHORUS_HD_INLINE bool reached(uint64_t completed, uint64_t base, uint64_t need) {
  return (completed & ~kDoneMask) == base && (completed & kDoneMask) >= need;
}

// Everything a block needs for one call, as plain pointers.
struct CallView {
  const PlanStep* steps = nullptr;
  const PlanBlock* blocks = nullptr;
  const int32_t* rankFirstBlock = nullptr;
  ConnView* conns = nullptr;
  RankView* ranks = nullptr;
  uint64_t* completed = nullptr;      // per block: stamp(epoch) + steps completed in the call
  uint32_t* ranksFinished = nullptr;  // per rank: blocks finished (the rank's last resets it)
  CallCounters* calls = nullptr;      // the group's
  int32_t groupBlocks = 0;            // blocks in the group (of the launch)
  BlockPos* positions = nullptr;      // per block, written when it stops
  ir::Slicing g;
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  ir::Protocol protocol = ir::Protocol::kSimple;
  int nslots = 8;
  int32_t instances = 1;  // the plan's: a block runs iterations instance, + instances, ...
};

// Steps block `depBlock` must have completed before a step waiting for its
// step `s.depStep` may run at iteration `iter` of a block of instance
// `instance`: the dependency's instance runs the same iterations, so count
// in this instance's iterations (ir::stepsNeeded for one instance). A
// running block keeps that count in its Cursor (`round`); this is for
// reports from a stopped block's position.
// (A lagged step waits for its dependency's round of the same slice,
// `depBack` rounds before its own.)
CHORUS_HD_INLINE uint64_t depStepsNeeded(const PlanStep& s, uint64_t iter, int32_t instance,
                                         int32_t instances) {
  uint64_t mine = (iter - static_cast<uint64_t>(instance)) / static_cast<uint64_t>(instances);
  mine = mine >= s.depBack ? mine - s.depBack : 0;
  return ir::stepsNeeded(static_cast<size_t>(mine), static_cast<size_t>(s.depSteps), s.depStep);
}

// A block's position, kept by every thread of the block alike.
struct Cursor {
  uint64_t iter = 0;   // iteration of its loop: instance + instances x round (a step of lag L
                       // moves the slice of iteration iter - instances x L)
  uint64_t round = 0;  // iterations this block has finished (its instance's)
  int32_t pc = 0;      // step within the iteration
  uint64_t done = 0;   // steps completed this call
  uint64_t sent = 0;   // messages sent on the send connection, ever (= head)
  uint64_t recvd = 0;  // messages consumed on the receive connection, ever (= tail)
  uint64_t epoch = 0;  // the call's number in the group
  uint64_t base = 0;   // stamp(epoch): completed counters of this call start here
};

enum class StepResult { kRan, kBlocked, kFinished };

// avg's division of a rank's output, a call of its own on a GPU (its
// twelve types' loops stay out of the step loop's registers).
CHORUS_HD_NOINLINE void divideOutput(DataType t, unsigned char* out, int divisor, size_t tid,
                                     size_t n, size_t nthreads) {
  elem::divideRange(t, out, divisor, tid, n, nthreads);
}

template <class Ctx>
class Block {
 public:
  CHORUS_HD Block(Ctx& ctx, const CallView& v, int b) : ctx_(ctx), v_(v), b_(b) {}

  // The block's starting position: counters carry over from earlier calls.
  CHORUS_HD Cursor start() const {
    Cursor c;
    const PlanBlock& pb = v_.blocks[b_];
    c.iter = static_cast<uint64_t>(pb.instance);
    if (pb.sendConn >= 0) c.sent = ctx_.loadAcquire(&v_.conns[pb.sendConn].ctr->head);
    if (pb.recvConn >= 0) c.recvd = ctx_.loadAcquire(&v_.conns[pb.recvConn].ctr->tail);
    c.epoch = ctx_.loadAcquire(&v_.calls->epoch);
    c.base = stamp(c.epoch);
    return c;
  }

  CHORUS_HD bool finished(const Cursor& c) const {
    const PlanBlock& pb = v_.blocks[b_];
    return pb.nsteps == 0 || c.iter >= v_.g.iterations + static_cast<uint64_t>(v_.instances) *
                                                             static_cast<uint64_t>(pb.maxLag);
  }

  // Runs the next step if it can.
  CHORUS_HD StepResult tryStep(Cursor& c) {
    const PlanBlock& pb = v_.blocks[b_];
    if (finished(c)) return StepResult::kFinished;
    const PlanStep& s = v_.steps[pb.firstStep + c.pc];
    // A lagged step before its instance's first slice or past its last has
    // nothing to move; it counts as done (what waits on it waits on a slice
    // it moves).
    const uint64_t back = static_cast<uint64_t>(v_.instances) * s.lag;
    if (c.iter < back || c.iter - back >= v_.g.iterations) {
      ++c.done;
      if (ctx_.tid() == 0) ctx_.storeRelease(&v_.completed[b_], c.base + c.done);
      next(c);
      return StepResult::kRan;
    }
    const uint64_t iter = c.iter - back;  // its slice's
    const bool snd = stepSends(s.type), rcv = stepReceives(s.type);
    const size_t n = v_.g.sliceLen(iter);
    const size_t chunkBytes = n * v_.g.elemSize;
    const size_t msgBytes = static_cast<size_t>(s.count) * chunkBytes;
    const bool simple = v_.protocol == ir::Protocol::kSimple;

    ConnView* sc = snd ? &v_.conns[pb.sendConn] : nullptr;
    ConnView* rc = rcv ? &v_.conns[pb.recvConn] : nullptr;
    // Thread 0 alone polls the counters the step waits for (its dependency,
    // a free slot, a Simple message), with acquire loads; the vote's barrier
    // then orders every thread's later reads after them (a release, the
    // acquire that saw it, a barrier: happens-before). One barrier per try.
    bool ready = true;
    if (ctx_.tid() == 0) {
      if (s.depBlock >= 0)
        ready = reached(ctx_.loadAcquire(&v_.completed[s.depBlock]), c.base,
                        ir::stepsNeeded(static_cast<size_t>(c.round - s.depBack),
                                        static_cast<size_t>(s.depSteps), s.depStep));
      if (ready && snd)
        ready = c.sent - ctx_.loadAcquire(&sc->ctr->tail) < static_cast<uint64_t>(v_.nslots);
      if (ready && rcv && simple) ready = ctx_.loadAcquire(&rc->ctr->head) >= c.recvd + 1;
    }
    if (!ctx_.all(ready)) return StepResult::kBlocked;
    if (!simple && (rcv || snd)) {
      const auto* in = rcv ? reinterpret_cast<const uint64_t*>(slotOf(*rc, c.recvd)) : nullptr;
      // Each thread checks some of the lines; the vote's barrier orders
      // every thread's payload loads after the checks.
      if (rcv && !ctx_.all(ln::arrived(ctx_, v_.protocol, in, c.recvd + 1, msgBytes)))
        return StepResult::kBlocked;
      lines(s, c, iter, in, snd ? reinterpret_cast<uint64_t*>(slotOf(*sc, c.sent)) : nullptr, n);
    } else {
      const unsigned char* in = rcv ? slotOf(*rc, c.recvd) : nullptr;
      unsigned char* out = snd ? slotOf(*sc, c.sent) : nullptr;
      for (int k = 0; k < s.count; ++k) {
        size_t at = static_cast<size_t>(k) * chunkBytes;
        unsigned char* src = s.srcOff >= 0 ? ptr(pb.rank, s.srcBuf, s.srcOff + k, iter) : nullptr;
        unsigned char* dst = s.dstOff >= 0 ? ptr(pb.rank, s.dstBuf, s.dstOff + k, iter) : nullptr;
        switch (s.type) {
          case kSend:
            copy(out + at, nullptr, src, chunkBytes);
            break;
          case kRecv:
            copy(dst, nullptr, in + at, chunkBytes);
            break;
          case kRecvCopySend:  // one pass: the slot is read once
            copy(dst, out + at, in + at, chunkBytes);
            break;
          case kRecvReduceSend:
            reduce(out + at, nullptr, in + at, src, n);
            break;
          case kRecvReduceCopy:
            reduce(dst, nullptr, in + at, src, n);
            break;
          case kRecvReduceCopySend:  // one pass to both destinations
            reduce(dst, out + at, in + at, src, n);
            break;
          case kCopy:
            if (dst != src) copy(dst, nullptr, src, chunkBytes);
            break;
          case kReduce:
            reduce(dst, nullptr, dst, src, n);
            break;
          default:
            break;
        }
        // Chunk k + 1 may read what chunk k wrote (a copy between
        // overlapping ranges of one buffer runs chunk after chunk).
        ctx_.sync();
      }
    }

    // Publish: the barrier orders every thread's writes before thread 0's
    // release stores of the counters that announce them (cumulativity).
    ctx_.sync();
    ++c.done;
    if (rcv) ++c.recvd;
    if (snd) ++c.sent;
    if (ctx_.tid() == 0) {
      if (rcv) ctx_.storeRelease(&rc->ctr->tail, c.recvd);
      if (snd) ctx_.storeRelease(&sc->ctr->head, c.sent);
      ctx_.storeRelease(&v_.completed[b_], c.base + c.done);
    }
    next(c);
    return StepResult::kRan;
  }

  // To the block's next step, and past its iteration's last to the next.
  CHORUS_HD void next(Cursor& c) const {
    if (++c.pc == v_.blocks[b_].nsteps) {
      c.pc = 0;
      c.iter += static_cast<uint64_t>(v_.instances);
      ++c.round;
    }
  }

  // Called by every block once it has finished (or stopped): records where
  // it is; for avg, lets the rank's last block divide the output; and lets
  // the group's last block advance the epoch for the next call.
  CHORUS_HD void finish(const Cursor& c) {
    const PlanBlock& pb = v_.blocks[b_];
    bool done = finished(c);
    if (ctx_.tid() == 0 && v_.positions != nullptr)
      v_.positions[b_] = BlockPos{c.iter, c.pc, done ? 1 : 0};
    if (!done) return;
    if (c.done == 0 && ctx_.tid() == 0) ctx_.storeRelease(&v_.completed[b_], c.base);
    const RankView& r = v_.ranks[pb.rank];
    ctx_.sync();  // every thread's writes before thread 0's acq_rel counts
    if (r.divisor != 0) {
      auto blocks =
          static_cast<uint32_t>(v_.rankFirstBlock[pb.rank + 1] - v_.rankFirstBlock[pb.rank]);
      bool last = false;
      if (ctx_.tid() == 0) {
        last = ctx_.fetchAddAcqRel(&v_.ranksFinished[pb.rank], 1u) + 1 == blocks;
        if (last) ctx_.fetchAddAcqRel(&v_.ranksFinished[pb.rank], 0u - blocks);  // to 0
      }
      if (ctx_.any(last)) {  // (the acquire was thread 0's; the vote's barrier carries it)
        divideOutput(v_.type, r.base[static_cast<int>(ir::Buffer::kOutput)], r.divisor,
                     static_cast<size_t>(ctx_.tid()), r.outElems,
                     static_cast<size_t>(ctx_.nthreads()));
      }
    }
    if (ctx_.tid() == 0) {
      auto blocks = static_cast<uint32_t>(v_.groupBlocks);
      if (ctx_.fetchAddAcqRel(&v_.calls->finished, 1u) + 1 == blocks) {
        ctx_.fetchAddAcqRel(&v_.calls->finished, 0u - blocks);  // to 0
        ctx_.storeRelease(&v_.calls->epoch, c.epoch + 1);
      }
    }
  }

 private:
  CHORUS_HD unsigned char* slotOf(const ConnView& cv, uint64_t seq) const {
    return cv.slots + (seq % static_cast<uint64_t>(v_.nslots)) * cv.slotBytes;
  }

  CHORUS_HD unsigned char* ptr(int rank, uint8_t buf, int chunk, uint64_t iter) const {
    return v_.ranks[rank].base[buf] +
           v_.g.sliceOffset(static_cast<size_t>(chunk), static_cast<size_t>(iter)) * v_.g.elemSize;
  }

  // A step on LL or LL128: its message from the lines at `in` (if it
  // receives), combined with its source, to its destination and to the
  // lines at `out` (if it sends), in one pass (lines.h). A step whose
  // destination is another of its chunks' source runs chunk after chunk, as
  // the CPU executor does, and then packs what it wrote.
  CHORUS_HD void lines(const PlanStep& s, const Cursor& c, uint64_t iter, const uint64_t* in,
                       uint64_t* out, size_t n) {
    const PlanBlock& pb = v_.blocks[b_];
    const bool usesSrc = s.type == kSend || s.type == kRecvReduceSend ||
                         s.type == kRecvReduceCopy || s.type == kRecvReduceCopySend;
    const bool usesDst = s.type == kRecv || s.type == kRecvCopySend || s.type == kRecvReduceCopy ||
                         s.type == kRecvReduceCopySend;
    ln::Job j;
    j.protocol = v_.protocol;
    j.in = in;
    j.out = out;
    j.outSeq = c.sent + 1;
    j.src = usesSrc && s.srcOff >= 0 ? ptr(pb.rank, s.srcBuf, s.srcOff, iter) : nullptr;
    j.dst = usesDst && s.dstOff >= 0 ? ptr(pb.rank, s.dstBuf, s.dstOff, iter) : nullptr;
    j.stride = v_.g.chunkElems * v_.g.elemSize;
    j.chunkBytes = n * v_.g.elemSize;
    j.msgBytes = static_cast<size_t>(s.count) * j.chunkBytes;
    if (j.src != nullptr && j.dst != nullptr && j.src != j.dst && sharesAChunk(j, s.count)) {
      ln::Job one = j;
      one.out = nullptr;
      for (int k = 0; k < s.count; ++k) {
        one.only = k;
        ln::run(ctx_, v_.type, v_.op, one);
        ctx_.sync();
      }
      if (out == nullptr) return;
      j.in = nullptr;  // the message is what the destination now holds
      j.src = j.dst;
      j.dst = nullptr;
    }
    ln::run(ctx_, v_.type, v_.op, j);
    if (out != nullptr && v_.protocol == ir::Protocol::kLL128) {
      ctx_.sync();  // every thread's payload stores before the flags' releases
      ln::publishFlags(ctx_, out, j.outSeq, j.msgBytes);
    }
  }

  // Whether a chunk of j's source is another of its chunks' destination
  // (chunks sit `stride` apart in every buffer, so slices of two chunks are
  // the same or disjoint).
  CHORUS_HD static bool sharesAChunk(const ln::Job& j, int count) {
    auto d = static_cast<size_t>(j.src > j.dst ? j.src - j.dst : j.dst - j.src);
    return j.stride != 0 && d % j.stride == 0 && d / j.stride < static_cast<size_t>(count);
  }

  // The block's threads move data together (reduce_copy.h).
  CHORUS_HD void copy(unsigned char* dst0, unsigned char* dst1, const unsigned char* src,
                      size_t bytes) {
    rc::copy(dst0, dst1, src, bytes, static_cast<size_t>(ctx_.tid()),
             static_cast<size_t>(ctx_.nthreads()));
  }

  CHORUS_HD void reduce(unsigned char* dst0, unsigned char* dst1, const unsigned char* a,
                        const unsigned char* b, size_t n) {
    rc::reduce(v_.type, v_.op, dst0, dst1, a, b, n, static_cast<size_t>(ctx_.tid()),
               static_cast<size_t>(ctx_.nthreads()));
  }

  Ctx& ctx_;
  const CallView& v_;
  int b_;
};

}  // namespace chorus::runtime::engine
