#include "runtime/exec/reduce.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>

#include "core/check.h"
#include "core/elementwise.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define CHORUS_X86_DISPATCH 1
#else
#define CHORUS_X86_DISPATCH 0
#endif

namespace chorus::runtime {
namespace {

// The arithmetic itself is elementwise.h's (shared with the GPU executor);
// this file only arranges it into loops the compiler vectorizes.
using elem::Bf16;
using elem::Bf16Type;
using elem::combine;
using elem::E4M3;
using elem::E4M3Type;
using elem::E5M2;
using elem::E5M2Type;
using elem::Half;
using elem::HalfType;

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
  elem::divideRange(type, buf, divisor, 0, count, 1);
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
