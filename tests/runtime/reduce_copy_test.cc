// The step engine's data path (runtime/exec/reduce_copy.h), run as a block
// of 1, 32 and 256 threads would run it (every thread's share in turn): for
// every type and op, pointer offsets within 16 bytes (shared and not),
// lengths 0 to 4 KiB, one and two destinations, in place and not, the
// result is bit for bit elem::reduceRange's (or the source, for a copy), no
// byte outside the range is written, and no element is reduced twice (an
// in-place sum done twice would change it). The one exception is a NaN
// from two NaNs: IEEE 754 leaves its sign and payload to the machine, and a
// compiler may swap the operands of an addition, so there both must be NaN.
#include "runtime/exec/reduce_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/elementwise.h"
#include "core/types.h"
#include "tests/support/elements.h"

namespace chorus::runtime {
namespace {

constexpr unsigned char kGuard = 0xA5;
constexpr size_t kPad = 64;  // guard bytes before and after each range

// A buffer with guard bytes around `bytes` at offset `off` from a 64-byte
// aligned start.
struct Buf {
  std::vector<unsigned char> mem;
  size_t off = 0, bytes = 0;
  unsigned char* base() {
    auto p = reinterpret_cast<uintptr_t>(mem.data());
    return mem.data() + (64 - p % 64) % 64 + kPad + off;
  }
  Buf(size_t offset, size_t n) : mem(n + 2 * kPad + 128, kGuard), off(offset), bytes(n) {}
  bool guardsIntact() {
    unsigned char* b = base();
    for (size_t i = 1; i <= kPad; ++i)
      if (b[-static_cast<ptrdiff_t>(i)] != kGuard || b[bytes + i - 1] != kGuard) return false;
    return true;
  }
};

using chorus::testing::firstDifference;

void fillRandom(unsigned char* p, size_t n, std::mt19937& rng) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(rng());
}

struct Offsets {
  size_t a, b, d0, d1;
};

std::vector<Offsets> offsetsFor(size_t e) {
  std::vector<Offsets> out;
  for (size_t o = 0; o < 16; o += e) out.push_back({o, o, o, o});  // packs after a head
  out.push_back({0, e, 0, 0});                                     // one source apart
  out.push_back({0, 0, e % 16, 0});                                // a destination apart
  out.push_back({0, 0, 0, 16 - e});                                // the second one apart
  return out;
}

const size_t kLengthsBytes[] = {0, 1, 7, 16, 33, 120, 255, 256, 257, 1000, 2048, 4096};
const size_t kThreads[] = {1, 32, 256};

TEST(ReduceCopy, EveryTypeOpOffsetAndLengthMatchesTheElementLoops) {
  std::mt19937 rng(42);
  int cases = 0;
  for (int ti = 0; ti < kNumDataTypes; ++ti) {
    auto t = static_cast<DataType>(ti);
    size_t e = dataTypeSize(t);
    for (int oi = 0; oi < kNumReduceOps; ++oi) {
      auto op = static_cast<ReduceOp>(oi);
      for (const Offsets& o : offsetsFor(e)) {
        for (size_t lenBytes : kLengthsBytes) {
          size_t n = lenBytes / e, bytes = n * e;
          for (size_t nthreads : kThreads) {
            for (int form = 0; form < 3; ++form) {  // one dst, two dsts, in place
              SCOPED_TRACE(std::string(dataTypeName(t)) + " " + std::string(reduceOpName(op)) +
                           " n=" + std::to_string(n) + " threads=" + std::to_string(nthreads) +
                           " form=" + std::to_string(form) + " offsets " + std::to_string(o.a) +
                           "," + std::to_string(o.b) + "," + std::to_string(o.d0) + "," +
                           std::to_string(o.d1));
              Buf a(o.a, bytes), b(o.b, bytes), d0(o.d0, bytes), d1(o.d1, bytes);
              fillRandom(a.base(), bytes, rng);
              fillRandom(b.base(), bytes, rng);
              std::vector<unsigned char> want(bytes + 1);
              elem::reduceRange(t, op, want.data(), a.base(), b.base(), 0, n, 1);
              unsigned char* dst0 = form == 2 ? a.base() : d0.base();
              unsigned char* dst1 = form == 1 ? d1.base() : nullptr;
              for (size_t tid = 0; tid < nthreads; ++tid)
                rc::reduce(t, op, dst0, dst1, a.base(), b.base(), n, tid, nthreads);
              ASSERT_EQ(firstDifference(t, dst0, want.data(), n), n);
              if (dst1 != nullptr) {
                ASSERT_EQ(std::memcmp(dst1, dst0, bytes), 0);  // one value, two places
              }
              ASSERT_TRUE(a.guardsIntact() && b.guardsIntact() && d0.guardsIntact() &&
                          d1.guardsIntact());
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 10000);
}

TEST(ReduceCopy, CopiesEveryOffsetAndLengthToOneOrTwoDestinations) {
  std::mt19937 rng(7);
  for (size_t so = 0; so < 16; ++so) {
    for (size_t d0o : {so, (so + 1) % 16, (so + 8) % 16}) {
      for (size_t bytes : kLengthsBytes) {
        for (size_t nthreads : kThreads) {
          for (bool two : {false, true}) {
            SCOPED_TRACE("bytes=" + std::to_string(bytes) + " src+" + std::to_string(so) + " dst+" +
                         std::to_string(d0o) + " threads=" + std::to_string(nthreads));
            Buf s(so, bytes), d0(d0o, bytes), d1(so, bytes);
            fillRandom(s.base(), bytes, rng);
            for (size_t tid = 0; tid < nthreads; ++tid)
              rc::copy(d0.base(), two ? d1.base() : nullptr, s.base(), bytes, tid, nthreads);
            ASSERT_EQ(std::memcmp(d0.base(), s.base(), bytes), 0);
            if (two) {
              ASSERT_EQ(std::memcmp(d1.base(), s.base(), bytes), 0);
            }
            ASSERT_TRUE(s.guardsIntact() && d0.guardsIntact() && d1.guardsIntact());
          }
        }
      }
    }
  }
}

// Each thread's packs: consecutive threads take consecutive 16-byte packs
// (coalesced), and a thread holds kUnroll packs of a round.
TEST(ReduceCopy, ThreadsTakeConsecutivePacksInRounds) {
  constexpr size_t kThreadsInBlock = 4;
  const size_t packs = rc::kCopyUnroll * kThreadsInBlock + 3;
  Buf s(0, packs * 16), d(0, packs * 16);
  std::mt19937 rng(1);
  fillRandom(s.base(), packs * 16, rng);
  // Thread 1 alone: packs 1, 5, 9, ... of the first round, then 1 + 32.
  rc::copy(d.base(), nullptr, s.base(), packs * 16, 1, kThreadsInBlock);
  for (size_t p = 0; p < packs; ++p) {
    bool mine = p % kThreadsInBlock == 1;
    EXPECT_EQ(std::memcmp(d.base() + p * 16, s.base() + p * 16, 16) == 0, mine) << "pack " << p;
  }
}

}  // namespace
}  // namespace chorus::runtime
