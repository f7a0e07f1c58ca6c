// Element arithmetic shared by the CPU reduction kernels (reduce.cc), the
// step engine (engine.h) and the CUDA executor: one definition of every data
// type's codec and every op, so a reduction computes the same bits on a CPU
// thread and on a GPU. Narrow floats (fp16, bf16, fp8) widen to float,
// combine, and round back to nearest even once per operation; integers wrap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/hd.h"
#include "core/types.h"

namespace chorus::elem {

CHORUS_HD_INLINE uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
CHORUS_HD_INLINE float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// c ? a : b on bits, as arithmetic: no branch for the vectorizer to refuse.
CHORUS_HD_INLINE uint32_t select(bool c, uint32_t a, uint32_t b) {
  return b ^ ((a ^ b) & (0u - static_cast<uint32_t>(c)));
}

// A binary floating-point format with E exponent and M mantissa bits whose
// exponent range is narrower than float's (fp16, fp8). kInf: the all-ones
// exponent with a zero mantissa is infinity (else only all-ones is NaN).
// kSat: overflow saturates to the largest finite value.
template <int E, int M, bool kInf, bool kSat>
struct Narrow {
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr uint32_t kInfCode = ((1u << E) - 1) << M;
  static constexpr uint32_t kMaxCode = kInf ? kInfCode - 1 : (kInfCode | ((1u << M) - 1)) - 1;
  static constexpr uint32_t kNanCode =
      kInf ? (kInfCode | (1u << (M - 1))) : (kInfCode | ((1u << M) - 1));

  static constexpr uint32_t kMantMask = (1u << M) - 1;
  // Float bits of the smallest normal, 2^(1-bias).
  static constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 - kBias + 1) << 23;
  // A float whose ulp equals the narrow format's subnormal quantum.
  static constexpr uint32_t kMagicBits = static_cast<uint32_t>(127 + 24 - kBias - M) << 23;
  // 2^(127-bias): rescales a narrow exponent field read as a float's.
  static constexpr uint32_t kScaleBits = static_cast<uint32_t>(127 + 127 - kBias) << 23;

  // Round to nearest, ties to even. Branch-free, so loops vectorize: both
  // the normal and the subnormal result are computed and one is selected.
  CHORUS_HD static uint32_t encode(float f) {
    uint32_t x = floatBits(f);
    uint32_t sign = (x >> 31) << (E + M);
    uint32_t ax = x & 0x7fffffffu;
    // Normal: rebias the exponent and round the dropped bits to even.
    uint32_t odd = (ax >> (23 - M)) & 1u;
    uint32_t normal =
        (ax - (static_cast<uint32_t>(127 - kBias) << 23) + ((1u << (22 - M)) - 1) + odd) >>
        (23 - M);
    // Subnormal: adding a float whose ulp is the subnormal quantum makes the
    // FPU round (to nearest even) at exactly the right bit.
    float magic = bitsFloat(kMagicBits);
    uint32_t sub = floatBits(bitsFloat(ax) + magic) - kMagicBits;
    uint32_t code = select(ax < kMinNormalBits, sub, normal);
    constexpr uint32_t kOverflow = kInf && !kSat ? kInfCode : kMaxCode;
    code = select(code > kMaxCode, kOverflow, code);
    code = select(ax == 0x7f800000u, kOverflow, code);
    code = select(ax > 0x7f800000u, kNanCode, code);
    return sign | code;
  }

  CHORUS_HD static float decode(uint32_t v) {
    uint32_t sign = ((v >> (E + M)) & 1u) << 31;
    uint32_t em = v & ((1u << (E + M)) - 1);
    // Read the narrow exponent and mantissa as a float's and rescale: exact
    // for normals and subnormals alike.
    uint32_t r = floatBits(bitsFloat(em << (23 - M)) * bitsFloat(kScaleBits));
    if constexpr (kInf) {
      r = select(em >= kInfCode, 0x7f800000u | ((em & kMantMask) << (23 - M)), r);
    } else {
      r = select(em == (kInfCode | kMantMask), 0x7fc00000u, r);
    }
    return bitsFloat(sign | r);
  }
};

using Half = Narrow<5, 10, true, false>;
using E4M3 = Narrow<4, 3, false, true>;
using E5M2 = Narrow<5, 2, true, true>;

struct Bf16 {
  CHORUS_HD static uint32_t encode(float f) {
    uint32_t x = floatBits(f);
    // Round to nearest even on the low 16 bits; overflow carries into inf.
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return select((x & 0x7fffffffu) > 0x7f800000u, ((x >> 16) & 0x8000u) | 0x7fc0u, rounded);
  }
  CHORUS_HD static float decode(uint32_t v) { return bitsFloat(v << 16); }
};

// Storage type + codec for the narrow types.
template <typename S, typename C>
struct NarrowType {
  using Storage = S;
  CHORUS_HD static float load(S v) { return C::decode(v); }
  CHORUS_HD static S store(float f) { return static_cast<S>(C::encode(f)); }
};

using HalfType = NarrowType<uint16_t, Half>;
using Bf16Type = NarrowType<uint16_t, Bf16>;
using E4M3Type = NarrowType<uint8_t, E4M3>;
using E5M2Type = NarrowType<uint8_t, E5M2>;

template <typename T>
CHORUS_HD_INLINE T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
CHORUS_HD_INLINE T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Promote to at least unsigned int so that uint8 * uint8 cannot reach a
    // signed int overflow.
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

// fmax/fmin semantics (a NaN operand is ignored unless both are NaN) as
// compares and a select, which vectorize; std::fmax is a library call.
template <typename T>
CHORUS_HD_INLINE T maxOf(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return ((a < b) | (a != a)) ? b : a;
  else
    return a < b ? b : a;
}

template <typename T>
CHORUS_HD_INLINE T minOf(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return ((b < a) | (a != a)) ? b : a;
  else
    return b < a ? b : a;
}

// One loop per (type, op): the op is a template parameter so each loop body
// is branch-free and the compiler can vectorize it.
template <ReduceOp kOp, typename T>
CHORUS_HD_INLINE T combine(T a, T b) {
  if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg)
    return wrapAdd(a, b);
  else if constexpr (kOp == ReduceOp::kProd)
    return wrapMul(a, b);
  else if constexpr (kOp == ReduceOp::kMax)
    return maxOf(a, b);
  else
    return minOf(a, b);
}

// Reads element i of a buffer of T (or a narrow type's storage) as the
// type the op computes in, and writes it back.
template <typename T>
struct Plain {
  using Storage = T;
  using Compute = T;
  CHORUS_HD_INLINE static T load(T v) { return v; }
  CHORUS_HD_INLINE static T store(T v) { return v; }
};

template <typename N>
struct Widened {
  using Storage = typename N::Storage;
  using Compute = float;
  CHORUS_HD_INLINE static float load(Storage v) { return N::load(v); }
  CHORUS_HD_INLINE static Storage store(float f) { return N::store(f); }
};

// dst[i] = a[i] (op) b[i] for i in [begin, end) with stride `step` (a CUDA
// block's threads take every step-th element; a host thread takes all).
template <ReduceOp kOp, typename Codec>
CHORUS_HD_INLINE void combineRange(void* dstv, const void* av, const void* bv, size_t begin,
                                   size_t end, size_t step) {
  using S = typename Codec::Storage;
  S* dst = static_cast<S*>(dstv);
  const S* a = static_cast<const S*>(av);
  const S* b = static_cast<const S*>(bv);
  for (size_t i = begin; i < end; i += step)
    dst[i] = Codec::store(combine<kOp>(Codec::load(a[i]), Codec::load(b[i])));
}

// buf[i] /= divisor: avg's second half. Integers truncate toward zero;
// floats divide in their compute type (narrow floats in float, rounded once).
template <typename Codec>
CHORUS_HD_INLINE void divideRange(void* bufv, int divisor, size_t begin, size_t end, size_t step) {
  using S = typename Codec::Storage;
  using C = typename Codec::Compute;
  S* buf = static_cast<S*>(bufv);
  for (size_t i = begin; i < end; i += step)
    buf[i] = Codec::store(static_cast<C>(Codec::load(buf[i]) / static_cast<C>(divisor)));
}

// Calls f.template operator()<Codec>() with the codec of `t`.
template <typename F>
CHORUS_HD_INLINE void withCodec(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt8:
      return f.template operator()<Plain<int8_t>>();
    case DataType::kUint8:
      return f.template operator()<Plain<uint8_t>>();
    case DataType::kInt32:
      return f.template operator()<Plain<int32_t>>();
    case DataType::kUint32:
      return f.template operator()<Plain<uint32_t>>();
    case DataType::kInt64:
      return f.template operator()<Plain<int64_t>>();
    case DataType::kUint64:
      return f.template operator()<Plain<uint64_t>>();
    case DataType::kFloat32:
      return f.template operator()<Plain<float>>();
    case DataType::kFloat64:
      return f.template operator()<Plain<double>>();
    case DataType::kFloat16:
      return f.template operator()<Widened<HalfType>>();
    case DataType::kBfloat16:
      return f.template operator()<Widened<Bf16Type>>();
    case DataType::kFp8E4M3:
      return f.template operator()<Widened<E4M3Type>>();
    case DataType::kFp8E5M2:
      return f.template operator()<Widened<E5M2Type>>();
  }
}

struct ReduceApply {
  ReduceOp op;
  void* dst;
  const void* a;
  const void* b;
  size_t begin, end, step;
  template <typename Codec>
  CHORUS_HD_INLINE void operator()() const {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return combineRange<ReduceOp::kSum, Codec>(dst, a, b, begin, end, step);
      case ReduceOp::kProd:
        return combineRange<ReduceOp::kProd, Codec>(dst, a, b, begin, end, step);
      case ReduceOp::kMax:
        return combineRange<ReduceOp::kMax, Codec>(dst, a, b, begin, end, step);
      case ReduceOp::kMin:
        return combineRange<ReduceOp::kMin, Codec>(dst, a, b, begin, end, step);
    }
  }
};

struct DivideApply {
  void* buf;
  int divisor;
  size_t begin, end, step;
  template <typename Codec>
  CHORUS_HD_INLINE void operator()() const {
    divideRange<Codec>(buf, divisor, begin, end, step);
  }
};

// dst[i] = a[i] (op) b[i] over [begin, end) by `step`, for any type and op
// (avg combines as sum).
CHORUS_HD_INLINE void reduceRange(DataType t, ReduceOp op, void* dst, const void* a, const void* b,
                                  size_t begin, size_t end, size_t step) {
  withCodec(t, ReduceApply{op, dst, a, b, begin, end, step});
}

// buf[i] /= divisor over [begin, end) by `step`.
CHORUS_HD_INLINE void divideRange(DataType t, void* buf, int divisor, size_t begin, size_t end,
                                  size_t step) {
  withCodec(t, DivideApply{buf, divisor, begin, end, step});
}

}  // namespace chorus::elem
