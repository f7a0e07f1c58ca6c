// The step engine's data path: one routine moves a thread's share of a
// step's elements, for every step type, on the host and on a GPU.
//
//   v = src0[i]            (a copy: src1 is null)
//   v = src0[i] op src1[i] (a reduction)
//   dst0[i] = v; if dst1: dst1[i] = v
//
// for i < n. Two destinations are how recv-copy-send and
// recv-reduce-copy-send make one pass: the received data is read once and
// written to the local buffer and to the next slot together.
//
// Memory-level parallelism is the point (docs/GPU-PERFORMANCE.md change 2).
// The elements move in 16-byte packs, and each thread loads kUnroll packs of
// every source before it combines and stores any, so a 256-thread block has
// 256 x kUnroll x 16 bytes in flight per source instead of one word per
// thread. Packs are dealt out so that consecutive threads take consecutive
// packs (coalesced): in a round of kUnroll x nthreads packs, thread t takes
// packs u x nthreads + t for u < kUnroll. Where the pointers do not share
// one alignment within 16 bytes, or at the unaligned head and the tail,
// elements move one at a time, thread t taking elements t, t + nthreads, ...
//
// Every element is read and written by exactly one thread, with the same
// codec and op as elem::reduceRange, so results are bit for bit those of the
// element loops (tests/runtime/reduce_copy_test.cc checks every type, op,
// offset, length and thread count), but for the sign and payload of a NaN
// made from two NaNs, which IEEE 754 leaves to the machine (a compiler may
// swap an addition's operands). A destination may be a source exactly
// (in place), never overlap one partly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/elementwise.h"
#include "core/hd.h"
#include "core/types.h"

namespace chorus::runtime::rc {

// Packs in flight per thread per source: copies hold one pack, reductions
// two (NCCL unrolls 4 to 8 on Hopper; registers bound it).
inline constexpr int kCopyUnroll = 8;
inline constexpr int kReduceUnroll = 4;

struct alignas(16) Pack {
  uint64_t w[2];
};

CHORUS_HD_INLINE Pack loadPack(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  uint4 v = *reinterpret_cast<const uint4*>(p);  // one 128-bit load
  Pack k;
  k.w[0] = static_cast<uint64_t>(v.x) | static_cast<uint64_t>(v.y) << 32;
  k.w[1] = static_cast<uint64_t>(v.z) | static_cast<uint64_t>(v.w) << 32;
  return k;
#else
  Pack k;
  std::memcpy(&k, p, sizeof k);
  return k;
#endif
}

CHORUS_HD_INLINE void storePack(unsigned char* p, const Pack& k) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(p) =
      make_uint4(static_cast<unsigned>(k.w[0]), static_cast<unsigned>(k.w[0] >> 32),
                 static_cast<unsigned>(k.w[1]), static_cast<unsigned>(k.w[1] >> 32));
#else
  std::memcpy(p, &k, sizeof k);
#endif
}

// A copy: packs and elements (bytes) as they are.
struct CopyFn {
  static constexpr size_t kElemBytes = 1;
  static constexpr int kUnroll = kCopyUnroll;
  static constexpr bool kReduces = false;
  CHORUS_HD_INLINE static Pack pack(const Pack& a, const Pack&) { return a; }
  CHORUS_HD_INLINE static void one(unsigned char* d, const unsigned char* a, const unsigned char*) {
    *d = *a;
  }
};

// A reduction with op kOp on elements of Codec (elementwise.h).
template <ReduceOp kOp, typename Codec>
struct ReduceFn {
  using S = typename Codec::Storage;
  static constexpr size_t kElemBytes = sizeof(S);
  static constexpr int kUnroll = kReduceUnroll;
  static constexpr bool kReduces = true;
  static constexpr int kPerPack = static_cast<int>(sizeof(Pack) / sizeof(S));
  CHORUS_HD_INLINE static S apply(S a, S b) {
    return Codec::store(elem::combine<kOp>(Codec::load(a), Codec::load(b)));
  }
  CHORUS_HD_INLINE static Pack pack(const Pack& a, const Pack& b) {
    S x[kPerPack], y[kPerPack];
    std::memcpy(x, &a, sizeof a);
    std::memcpy(y, &b, sizeof b);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int i = 0; i < kPerPack; ++i) x[i] = apply(x[i], y[i]);
    Pack r;
    std::memcpy(&r, x, sizeof r);
    return r;
  }
  CHORUS_HD_INLINE static void one(unsigned char* d, const unsigned char* a,
                                   const unsigned char* b) {
    S x, y;
    std::memcpy(&x, a, sizeof x);
    std::memcpy(&y, b, sizeof y);
    x = apply(x, y);
    std::memcpy(d, &x, sizeof x);
  }
};

// Elements [begin, end) one at a time, thread tid taking every nthreads-th.
template <typename Fn>
CHORUS_HD_INLINE void elementsOneByOne(const unsigned char* src0, const unsigned char* src1,
                                       unsigned char* dst0, unsigned char* dst1, size_t begin,
                                       size_t end, size_t tid, size_t nthreads) {
  constexpr size_t kE = Fn::kElemBytes;
  for (size_t i = begin + tid; i < end; i += nthreads) {
    size_t at = i * kE;
    Fn::one(dst0 + at, src0 + at, Fn::kReduces ? src1 + at : nullptr);
    if (dst1 != nullptr) std::memcpy(dst1 + at, dst0 + at, kE);
  }
}

// Thread tid's packs of the round that starts at pack `base`, from `src`.
template <int kU>
CHORUS_HD_INLINE void loadRound(Pack (&into)[kU], const unsigned char* src, size_t base,
                                size_t npacks, size_t tid, size_t nthreads) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int u = 0; u < kU; ++u) {
    size_t p = base + static_cast<size_t>(u) * nthreads + tid;
    if (p < npacks) into[u] = loadPack(src + p * 16);
  }
}

// Thread tid's share of n elements of the operation Fn (see the header).
template <typename Fn>
CHORUS_HD_NOINLINE void reduceCopyWith(const unsigned char* src0, const unsigned char* src1,
                                       unsigned char* dst0, unsigned char* dst1, size_t n,
                                       size_t tid, size_t nthreads) {
  constexpr size_t kE = Fn::kElemBytes;
  constexpr int kU = Fn::kUnroll;
  // Packs need every pointer at the same offset within 16 bytes.
  auto mis = static_cast<size_t>(reinterpret_cast<uintptr_t>(src0) % 16);
  bool packs = mis % kE == 0 && reinterpret_cast<uintptr_t>(dst0) % 16 == mis &&
               (!Fn::kReduces || reinterpret_cast<uintptr_t>(src1) % 16 == mis) &&
               (dst1 == nullptr || reinterpret_cast<uintptr_t>(dst1) % 16 == mis);
  if (!packs) {
    elementsOneByOne<Fn>(src0, src1, dst0, dst1, 0, n, tid, nthreads);
    return;
  }
  size_t head = (16 - mis) % 16 / kE;
  if (head > n) head = n;
  elementsOneByOne<Fn>(src0, src1, dst0, dst1, 0, head, tid, nthreads);
  const size_t start = head * kE;
  const size_t npacks = (n - head) * kE / 16;
  const size_t round = static_cast<size_t>(kU) * nthreads;
  for (size_t base = 0; base < npacks; base += round) {
    Pack a[kU] = {}, b[kU] = {};
    loadRound(a, src0 + start, base, npacks, tid, nthreads);
    if constexpr (Fn::kReduces) loadRound(b, src1 + start, base, npacks, tid, nthreads);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int u = 0; u < kU; ++u) {
      size_t p = base + static_cast<size_t>(u) * nthreads + tid;
      if (p >= npacks) continue;
      Pack r = Fn::pack(a[u], b[u]);
      storePack(dst0 + start + p * 16, r);
      if (dst1 != nullptr) storePack(dst1 + start + p * 16, r);
    }
  }
  elementsOneByOne<Fn>(src0, src1, dst0, dst1, head + npacks * 16 / kE, n, tid, nthreads);
}

struct ReduceCopyApply {
  ReduceOp op;
  const unsigned char* src0;
  const unsigned char* src1;
  unsigned char* dst0;
  unsigned char* dst1;
  size_t n, tid, nthreads;
  template <typename Codec>
  CHORUS_HD_INLINE void operator()() const {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return reduceCopyWith<ReduceFn<ReduceOp::kSum, Codec>>(src0, src1, dst0, dst1, n, tid,
                                                               nthreads);
      case ReduceOp::kProd:
        return reduceCopyWith<ReduceFn<ReduceOp::kProd, Codec>>(src0, src1, dst0, dst1, n, tid,
                                                                nthreads);
      case ReduceOp::kMax:
        return reduceCopyWith<ReduceFn<ReduceOp::kMax, Codec>>(src0, src1, dst0, dst1, n, tid,
                                                               nthreads);
      case ReduceOp::kMin:
        return reduceCopyWith<ReduceFn<ReduceOp::kMin, Codec>>(src0, src1, dst0, dst1, n, tid,
                                                               nthreads);
    }
  }
};

struct CombineApply {
  ReduceOp op;
  const Pack& a;
  const Pack& b;
  Pack* out;
  template <typename Codec>
  CHORUS_HD_INLINE void operator()() const {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        *out = ReduceFn<ReduceOp::kSum, Codec>::pack(a, b);
        return;
      case ReduceOp::kProd:
        *out = ReduceFn<ReduceOp::kProd, Codec>::pack(a, b);
        return;
      case ReduceOp::kMax:
        *out = ReduceFn<ReduceOp::kMax, Codec>::pack(a, b);
        return;
      case ReduceOp::kMin:
        *out = ReduceFn<ReduceOp::kMin, Codec>::pack(a, b);
        return;
    }
  }
};

// The elements of pack `a` combined with those of `b` (type t, op; avg as
// sum): one body for the line protocols' units (lines.h), which take a
// pack at a time.
CHORUS_HD_NOINLINE Pack combine(DataType t, ReduceOp op, const Pack& a, const Pack& b) {
  Pack out = a;
  elem::withCodec(t, CombineApply{op, a, b, &out});
  return out;
}

// Thread tid's share of copying `bytes` from src to dst0 (and dst1).
CHORUS_HD_INLINE void copy(unsigned char* dst0, unsigned char* dst1, const unsigned char* src,
                           size_t bytes, size_t tid, size_t nthreads) {
  reduceCopyWith<CopyFn>(src, nullptr, dst0, dst1, bytes, tid, nthreads);
}

// Thread tid's share of dst0[i] (= dst1[i]) = a[i] op b[i] over n elements
// of type t (avg combines as sum).
CHORUS_HD_INLINE void reduce(DataType t, ReduceOp op, unsigned char* dst0, unsigned char* dst1,
                             const unsigned char* a, const unsigned char* b, size_t n, size_t tid,
                             size_t nthreads) {
  elem::withCodec(t, ReduceCopyApply{op, a, b, dst0, dst1, n, tid, nthreads});
}

}  // namespace chorus::runtime::rc
