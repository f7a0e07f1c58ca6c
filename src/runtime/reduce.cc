#include "runtime/reduce.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>

#include "core/check.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define CHORUS_X86_DISPATCH 1
#else
#define CHORUS_X86_DISPATCH 0
#endif

namespace chorus::runtime {
namespace {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// c ? a : b on bits, as arithmetic: no branch for the vectorizer to refuse.
inline uint32_t select(bool c, uint32_t a, uint32_t b) {
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
  static uint32_t encode(float f) {
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

  static float decode(uint32_t v) {
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
  static uint32_t encode(float f) {
    uint32_t x = floatBits(f);
    // Round to nearest even on the low 16 bits; overflow carries into inf.
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return select((x & 0x7fffffffu) > 0x7f800000u, ((x >> 16) & 0x8000u) | 0x7fc0u, rounded);
  }
  static float decode(uint32_t v) { return bitsFloat(v << 16); }
};

// Storage type + codec for the narrow types.
template <typename S, typename C>
struct NarrowType {
  using Storage = S;
  static float load(S v) { return C::decode(v); }
  static S store(float f) { return static_cast<S>(C::encode(f)); }
};

using HalfType = NarrowType<uint16_t, Half>;
using Bf16Type = NarrowType<uint16_t, Bf16>;
using E4M3Type = NarrowType<uint8_t, E4M3>;
using E5M2Type = NarrowType<uint8_t, E5M2>;

template <typename T>
inline T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
inline T wrapMul(T a, T b) {
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
inline T maxOf(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return ((a < b) | (a != a)) ? b : a;
  else
    return a < b ? b : a;
}

template <typename T>
inline T minOf(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return ((b < a) | (a != a)) ? b : a;
  else
    return b < a ? b : a;
}

// One loop per (type, op): the op is a template parameter so each loop body
// is branch-free and the compiler can vectorize it.
template <ReduceOp kOp, typename T>
inline T combine(T a, T b) {
  if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg)
    return wrapAdd(a, b);
  else if constexpr (kOp == ReduceOp::kProd)
    return wrapMul(a, b);
  else if constexpr (kOp == ReduceOp::kMax)
    return maxOf(a, b);
  else
    return minOf(a, b);
}

// Loop bodies are force-inlined into a baseline and an AVX2 build of each
// loop; reduce() picks one by CPU feature at run time (the binary stays
// portable to any x86-64 or other architecture).
template <ReduceOp kOp, typename T>
[[gnu::always_inline]] inline void plainBody(void* dstv, const void* av, const void* bv, size_t n) {
  T* dst = static_cast<T*>(dstv);
  const T* a = static_cast<const T*>(av);
  const T* b = static_cast<const T*>(bv);
  for (size_t i = 0; i < n; ++i) dst[i] = combine<kOp>(a[i], b[i]);
}

template <ReduceOp kOp, typename N>
[[gnu::always_inline]] inline void narrowBody(void* dstv, const void* av, const void* bv,
                                              size_t n) {
  using S = typename N::Storage;
  S* dst = static_cast<S*>(dstv);
  const S* a = static_cast<const S*>(av);
  const S* b = static_cast<const S*>(bv);
  for (size_t i = 0; i < n; ++i) dst[i] = N::store(combine<kOp>(N::load(a[i]), N::load(b[i])));
}

template <ReduceOp kOp, typename T>
void plainLoop(void* dst, const void* a, const void* b, size_t n) {
  plainBody<kOp, T>(dst, a, b, n);
}
template <ReduceOp kOp, typename N>
void narrowLoop(void* dst, const void* a, const void* b, size_t n) {
  narrowBody<kOp, N>(dst, a, b, n);
}

#if CHORUS_X86_DISPATCH
template <ReduceOp kOp, typename T>
[[gnu::target("avx2")]] void plainLoopAvx2(void* dst, const void* a, const void* b, size_t n) {
  plainBody<kOp, T>(dst, a, b, n);
}
template <ReduceOp kOp, typename N>
[[gnu::target("avx2")]] void narrowLoopAvx2(void* dst, const void* a, const void* b, size_t n) {
  narrowBody<kOp, N>(dst, a, b, n);
}

// fp16 with the F16C converters, which round to nearest even exactly as
// Half::encode does (NaN payloads aside). The op is the same compare-and-
// select as the scalar combine(), so results agree bit for bit.
template <ReduceOp kOp>
[[gnu::target("avx2,f16c")]] void halfLoopF16c(void* dstv, const void* av, const void* bv,
                                               size_t n) {
  auto* dst = static_cast<uint16_t*>(dstv);
  const auto* a = static_cast<const uint16_t*>(av);
  const auto* b = static_cast<const uint16_t*>(bv);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    __m256 r;
    if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg) {
      r = _mm256_add_ps(x, y);
    } else if constexpr (kOp == ReduceOp::kProd) {
      r = _mm256_mul_ps(x, y);
    } else {
      __m256 xNan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
      __m256 less =
          kOp == ReduceOp::kMax ? _mm256_cmp_ps(x, y, _CMP_LT_OQ) : _mm256_cmp_ps(y, x, _CMP_LT_OQ);
      r = _mm256_blendv_ps(x, y, _mm256_or_ps(less, xNan));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  narrowBody<kOp, HalfType>(dst + i, a + i, b + i, n - i);
}

bool cpuHas(const char* feature) {
  __builtin_cpu_init();
  if (std::string_view(feature) == "avx2") return __builtin_cpu_supports("avx2");
  // F16C straight from CPUID leaf 1 (ECX bit 29): clang's
  // __builtin_cpu_supports does not know the feature.
  unsigned a = 0, b = 0, c = 0, d = 0;
  bool f16c = __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0;
  return __builtin_cpu_supports("avx2") && f16c;
}
#endif

using LoopFn = void (*)(void*, const void*, const void*, size_t);

std::atomic<KernelIsa> gIsa{KernelIsa::kAuto};

bool useAvx2() {
#if CHORUS_X86_DISPATCH
  static const bool kHas = cpuHas("avx2");
  return kHas && gIsa.load(std::memory_order_relaxed) == KernelIsa::kAuto;
#else
  return false;
#endif
}

bool useF16c() {
#if CHORUS_X86_DISPATCH
  static const bool kHas = cpuHas("f16c");
  return kHas && gIsa.load(std::memory_order_relaxed) == KernelIsa::kAuto;
#else
  return false;
#endif
}

template <ReduceOp kOp>
LoopFn loopFor(DataType t) {
#if CHORUS_X86_DISPATCH
  const bool kAvx2 = useAvx2();
  const bool kF16c = useF16c();
#define CHORUS_PLAIN(T) (kAvx2 ? plainLoopAvx2<kOp, T> : plainLoop<kOp, T>)
#define CHORUS_NARROW(N) (kAvx2 ? narrowLoopAvx2<kOp, N> : narrowLoop<kOp, N>)
  if (t == DataType::kFloat16 && kF16c) return halfLoopF16c<kOp>;
#else
#define CHORUS_PLAIN(T) (plainLoop<kOp, T>)
#define CHORUS_NARROW(N) (narrowLoop<kOp, N>)
#endif
  switch (t) {
    case DataType::kInt8:
      return CHORUS_PLAIN(int8_t);
    case DataType::kUint8:
      return CHORUS_PLAIN(uint8_t);
    case DataType::kInt32:
      return CHORUS_PLAIN(int32_t);
    case DataType::kUint32:
      return CHORUS_PLAIN(uint32_t);
    case DataType::kInt64:
      return CHORUS_PLAIN(int64_t);
    case DataType::kUint64:
      return CHORUS_PLAIN(uint64_t);
    case DataType::kFloat32:
      return CHORUS_PLAIN(float);
    case DataType::kFloat64:
      return CHORUS_PLAIN(double);
    case DataType::kFloat16:
      return CHORUS_NARROW(HalfType);
    case DataType::kBfloat16:
      return CHORUS_NARROW(Bf16Type);
    case DataType::kFp8E4M3:
      return CHORUS_NARROW(E4M3Type);
    case DataType::kFp8E5M2:
      return CHORUS_NARROW(E5M2Type);
  }
#undef CHORUS_PLAIN
#undef CHORUS_NARROW
  CHORUS_CHECK(false, "unknown data type");
  return nullptr;
}

LoopFn loopFor(DataType t, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return loopFor<ReduceOp::kSum>(t);
    case ReduceOp::kProd:
      return loopFor<ReduceOp::kProd>(t);
    case ReduceOp::kMax:
      return loopFor<ReduceOp::kMax>(t);
    case ReduceOp::kMin:
      return loopFor<ReduceOp::kMin>(t);
  }
  CHORUS_CHECK(false, "unknown reduction op");
  return nullptr;
}

template <typename T>
void divideLoop(void* bufv, size_t n, int divisor) {
  T* buf = static_cast<T*>(bufv);
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<T>(buf[i] / static_cast<T>(divisor));
}

template <typename N>
void divideNarrow(void* bufv, size_t n, int divisor) {
  using S = typename N::Storage;
  S* buf = static_cast<S*>(bufv);
  float d = static_cast<float>(divisor);
  for (size_t i = 0; i < n; ++i) buf[i] = N::store(N::load(buf[i]) / d);
}

}  // namespace

void reduce(DataType type, ReduceOp op, void* dst, const void* a, const void* b, size_t count) {
  loopFor(type, op)(dst, a, b, count);
}

void reduceMany(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                size_t count) {
  LoopFn fn = loopFor(type, op);
  for (int k = 0; k < n; ++k) fn(dst, dst, srcs[k], count);
}

void divideInPlace(DataType type, void* buf, size_t count, int divisor) {
  CHORUS_CHECK(divisor > 0, "avg divisor must be positive");
  switch (type) {
    case DataType::kInt8:
      return divideLoop<int8_t>(buf, count, divisor);
    case DataType::kUint8:
      return divideLoop<uint8_t>(buf, count, divisor);
    case DataType::kInt32:
      return divideLoop<int32_t>(buf, count, divisor);
    case DataType::kUint32:
      return divideLoop<uint32_t>(buf, count, divisor);
    case DataType::kInt64:
      return divideLoop<int64_t>(buf, count, divisor);
    case DataType::kUint64:
      return divideLoop<uint64_t>(buf, count, divisor);
    case DataType::kFloat32:
      return divideLoop<float>(buf, count, divisor);
    case DataType::kFloat64:
      return divideLoop<double>(buf, count, divisor);
    case DataType::kFloat16:
      return divideNarrow<HalfType>(buf, count, divisor);
    case DataType::kBfloat16:
      return divideNarrow<Bf16Type>(buf, count, divisor);
    case DataType::kFp8E4M3:
      return divideNarrow<E4M3Type>(buf, count, divisor);
    case DataType::kFp8E5M2:
      return divideNarrow<E5M2Type>(buf, count, divisor);
  }
}

void setKernelIsa(KernelIsa isa) { gIsa.store(isa, std::memory_order_relaxed); }

const char* kernelIsaName(DataType type) {
  if (type == DataType::kFloat16 && useF16c()) return "avx2+f16c";
  return useAvx2() ? "avx2" : "baseline";
}

float halfBitsToFloat(uint16_t h) { return Half::decode(h); }
uint16_t floatToHalfBits(float f) { return static_cast<uint16_t>(Half::encode(f)); }
float bf16BitsToFloat(uint16_t b) { return Bf16::decode(b); }
uint16_t floatToBf16Bits(float f) { return static_cast<uint16_t>(Bf16::encode(f)); }
float e4m3BitsToFloat(uint8_t v) { return E4M3::decode(v); }
uint8_t floatToE4m3Bits(float f) { return static_cast<uint8_t>(E4M3::encode(f)); }
float e5m2BitsToFloat(uint8_t v) { return E5M2::decode(v); }
uint8_t floatToE5m2Bits(float f) { return static_cast<uint8_t>(E5M2::encode(f)); }

}  // namespace chorus::runtime
