// LL and LL128 read and written in place (runtime/exec/lines.h), run as a
// block of 1, 8 and 32 threads would run it (every thread's share in turn):
// a message packed from chunks that sit apart in memory and unpacked again
// is the same bytes, with nothing written outside the chunks' slices or
// past the slot; a receive that reduces and forwards gives
// elem::reduceRange's bits in its destination and in the lines it sends;
// flags show a message only once it is whole; a pass limited to one chunk
// writes only that chunk.
#include "runtime/exec/lines.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/elementwise.h"
#include "core/types.h"
#include "runtime/exec/engine.h"
#include "tests/support/elements.h"

namespace chorus::runtime::lines_test {
namespace {

constexpr unsigned char kGuard = 0xA5;
constexpr uint64_t kCanary = 0x5A5A5A5A5A5A5A5Aull;

// Thread `t` of `n`, with the host's atomics.
struct SerialCtx {
  int t = 0, n = 1;
  int tid() const { return t; }
  int nthreads() const { return n; }
  static uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static uint64_t loadRelaxed(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
  static void storeRelease(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  static void storeRelaxed(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
};

template <typename F>
void everyThread(int n, F f) {
  for (int t = 0; t < n; ++t) f(SerialCtx{t, n});
}

template <typename F>
bool allThreads(int n, F f) {
  bool all = true;
  for (int t = 0; t < n; ++t) all = f(SerialCtx{t, n}) && all;
  return all;
}

// `count` chunk slices of `chunkBytes`, `stride` apart, in guard bytes.
struct Chunked {
  size_t chunkBytes, stride;
  int count;
  std::vector<unsigned char> mem;
  Chunked(size_t cb, size_t st, int n)
      : chunkBytes(cb), stride(st), count(n), mem(st * static_cast<size_t>(n) + 64, kGuard) {}
  unsigned char* base() { return mem.data() + 16; }
  bool inSlice(size_t i) const {
    if (i < 16) return false;
    size_t m = i - 16;
    return m / stride < static_cast<size_t>(count) && m % stride < chunkBytes;
  }
  // The message: every chunk's slice, one after another.
  std::vector<unsigned char> message() {
    std::vector<unsigned char> m;
    for (int k = 0; k < count; ++k)
      m.insert(m.end(), base() + static_cast<size_t>(k) * stride,
               base() + static_cast<size_t>(k) * stride + chunkBytes);
    return m;
  }
  bool guardsIntact() const {
    for (size_t i = 0; i < mem.size(); ++i)
      if (!inSlice(i) && mem[i] != kGuard) return false;
    return true;
  }
};

void fillRandom(Chunked& c, std::mt19937& rng) {
  for (size_t i = 0; i < c.mem.size(); ++i)
    if (c.inSlice(i)) c.mem[i] = static_cast<unsigned char>(rng());
}

// A slot for `msgBytes` with canary words after it.
struct Slot {
  std::vector<uint64_t> words;
  size_t used;
  Slot(ir::Protocol p, size_t msgBytes) : used(engine::slotBytesFor(p, msgBytes) / 8) {
    words.assign(used + 4, 0);
    for (size_t i = used; i < words.size(); ++i) words[i] = kCanary;
  }
  bool canariesIntact() const {
    for (size_t i = used; i < words.size(); ++i)
      if (words[i] != kCanary) return false;
    return true;
  }
};

ln::Job jobFor(ir::Protocol p, const Chunked& c) {
  ln::Job j;
  j.protocol = p;
  j.stride = c.stride;
  j.chunkBytes = c.chunkBytes;
  j.msgBytes = c.chunkBytes * static_cast<size_t>(c.count);
  return j;
}

// Packs `from` into `slot` as message `seq`, publishing LL128's flags.
void send(ir::Protocol p, int threads, Chunked& from, Slot& slot, uint64_t seq) {
  ln::Job j = jobFor(p, from);
  j.src = from.base();
  j.out = slot.words.data();
  j.outSeq = seq;
  everyThread(threads, [&](SerialCtx x) { ln::run(x, DataType::kUint8, ReduceOp::kSum, j); });
  if (p == ir::Protocol::kLL128)
    everyThread(threads,
                [&](SerialCtx x) { ln::publishFlags(x, slot.words.data(), seq, j.msgBytes); });
}

bool arrivedAll(ir::Protocol p, int threads, const Slot& slot, uint64_t seq, size_t msgBytes) {
  return allThreads(
      threads, [&](SerialCtx x) { return ln::arrived(x, p, slot.words.data(), seq, msgBytes); });
}

using chorus::testing::firstDifference;

constexpr ir::Protocol kProtocols[] = {ir::Protocol::kLL, ir::Protocol::kLL128};
constexpr int kThreads[] = {1, 8, 32};

std::string name(ir::Protocol p) { return p == ir::Protocol::kLL ? "LL" : "LL128"; }

TEST(Lines, PackedChunksUnpackToTheSameBytes) {
  std::mt19937 rng(7);
  for (ir::Protocol p : kProtocols)
    for (size_t es : {1, 2, 4, 8})
      for (size_t elems : {1, 3, 7, 30, 31, 61})
        for (int count : {1, 2, 3})
          for (size_t gap : {size_t{0}, 5 * es})
            for (int threads : kThreads) {
              SCOPED_TRACE(name(p) + " elem " + std::to_string(es) + " x " + std::to_string(elems) +
                           " count " + std::to_string(count) + " gap " + std::to_string(gap) +
                           " threads " + std::to_string(threads));
              const size_t cb = elems * es;
              Chunked from(cb, cb + gap, count), to(cb, cb + gap, count);
              fillRandom(from, rng);
              const size_t msg = cb * static_cast<size_t>(count);
              Slot slot(p, msg);
              const uint64_t seq = 7;
              ASSERT_FALSE(arrivedAll(p, threads, slot, seq, msg));
              send(p, threads, from, slot, seq);
              ASSERT_TRUE(arrivedAll(p, threads, slot, seq, msg));
              ASSERT_FALSE(arrivedAll(p, threads, slot, seq + 1, msg));
              ASSERT_TRUE(slot.canariesIntact());
              ln::Job j = jobFor(p, to);
              j.in = slot.words.data();
              j.dst = to.base();
              everyThread(threads,
                          [&](SerialCtx x) { ln::run(x, DataType::kUint8, ReduceOp::kSum, j); });
              ASSERT_EQ(to.message(), from.message());
              ASSERT_TRUE(to.guardsIntact());
            }
}

TEST(Lines, Ll128FlagsFollowTheWholePayload) {
  // Payload stored, flags not yet published: no thread sees the message.
  const ir::Protocol p = ir::Protocol::kLL128;
  Chunked from(4 * 97, 4 * 97, 2);
  std::mt19937 rng(3);
  fillRandom(from, rng);
  const size_t msg = from.chunkBytes * 2;
  Slot slot(p, msg);
  ln::Job j = jobFor(p, from);
  j.src = from.base();
  j.out = slot.words.data();
  j.outSeq = 11;
  everyThread(32, [&](SerialCtx x) { ln::run(x, DataType::kUint8, ReduceOp::kSum, j); });
  for (int t = 0; t < 32; ++t)
    EXPECT_FALSE(ln::arrived(SerialCtx{t, 32}, p, slot.words.data(), 11, msg) &&
                 t < static_cast<int>(ln::lineCount(p, msg)));
  everyThread(32, [&](SerialCtx x) { ln::publishFlags(x, slot.words.data(), 11, msg); });
  EXPECT_TRUE(arrivedAll(p, 32, slot, 11, msg));
}

TEST(Lines, ReduceAndForwardMatchesTheElementLoops) {
  std::mt19937 rng(11);
  for (ir::Protocol p : kProtocols)
    for (int t = 0; t < kNumDataTypes; ++t)
      for (int o = 0; o < kNumReduceOps; ++o)
        for (size_t elems : {1, 5, 33})
          for (int threads : {1, 32}) {
            auto type = static_cast<DataType>(t);
            auto op = static_cast<ReduceOp>(o);
            const size_t es = dataTypeSize(type);
            SCOPED_TRACE(name(p) + " " + std::string(dataTypeName(type)) + " " +
                         std::string(reduceOpName(op)) + " x " + std::to_string(elems) +
                         " threads " + std::to_string(threads));
            const size_t cb = elems * es;
            const int count = 3;
            Chunked a(cb, cb + 3 * es, count), b(cb, cb + 3 * es, count),
                dst(cb, cb + 3 * es, count), fwd(cb, cb + 3 * es, count);
            fillRandom(a, rng);
            fillRandom(b, rng);
            const size_t msg = cb * count;
            Slot in(p, msg), out(p, msg);
            send(p, threads, a, in, 5);
            // Receive a, reduce with b, to dst and to the outgoing lines.
            ln::Job j = jobFor(p, b);
            j.in = in.words.data();
            j.src = b.base();
            j.dst = dst.base();
            j.out = out.words.data();
            j.outSeq = 9;
            everyThread(threads, [&](SerialCtx x) { ln::run(x, type, op, j); });
            if (p == ir::Protocol::kLL128)
              everyThread(threads,
                          [&](SerialCtx x) { ln::publishFlags(x, out.words.data(), 9, msg); });
            ASSERT_TRUE(arrivedAll(p, threads, out, 9, msg));
            ln::Job r = jobFor(p, fwd);
            r.in = out.words.data();
            r.dst = fwd.base();
            everyThread(threads,
                        [&](SerialCtx x) { ln::run(x, DataType::kUint8, ReduceOp::kSum, r); });
            std::vector<unsigned char> am = a.message(), bm = b.message(), want(msg);
            elem::reduceRange(type, op, want.data(), am.data(), bm.data(), 0, msg / es, 1);
            std::vector<unsigned char> got = dst.message(), sent = fwd.message();
            ASSERT_EQ(firstDifference(type, got.data(), want.data(), msg / es), msg / es);
            ASSERT_EQ(sent, got);  // what is forwarded is what was written, bit for bit
            ASSERT_TRUE(dst.guardsIntact());
            ASSERT_TRUE(fwd.guardsIntact());
            ASSERT_TRUE(out.canariesIntact());
          }
}

TEST(Lines, APassLimitedToOneChunkWritesOnlyThatChunk) {
  std::mt19937 rng(5);
  for (ir::Protocol p : kProtocols)
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE(name(p) + " chunk " + std::to_string(k));
      const size_t cb = 4 * 7;  // not a multiple of 8: units straddle chunks
      Chunked a(cb, cb, 3), to(cb, cb, 3);
      fillRandom(a, rng);
      Slot slot(p, cb * 3);
      send(p, 8, a, slot, 1);
      ln::Job j = jobFor(p, to);
      j.in = slot.words.data();
      j.dst = to.base();
      j.only = k;
      everyThread(8, [&](SerialCtx x) { ln::run(x, DataType::kUint8, ReduceOp::kSum, j); });
      std::vector<unsigned char> got = to.message(), want = a.message();
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], i / cb == static_cast<size_t>(k) ? want[i] : kGuard) << "byte " << i;
    }
}

}  // namespace
}  // namespace chorus::runtime::lines_test
