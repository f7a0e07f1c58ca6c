// Reduction kernels: the fast conversions agree bit for bit with the
// reference conversions of core/types.h at every code and rounding boundary,
// and every (type, op) kernel agrees with a scalar reference.
#include "runtime/exec/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/types.h"
#include "tests/support/reference_ops.h"

namespace chorus::runtime {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Codec {
  const char* name;
  int bits;
  float (*fastDecode)(uint32_t);
  uint32_t (*fastEncode)(float);
  float (*refDecode)(uint32_t);
  uint32_t (*refEncode)(float);
};

const Codec kCodecs[] = {
    {"fp16", 16, [](uint32_t v) { return halfBitsToFloat(static_cast<uint16_t>(v)); },
     [](float f) { return uint32_t{floatToHalfBits(f)}; },
     [](uint32_t v) { return halfToFloat(static_cast<uint16_t>(v)); },
     [](float f) { return uint32_t{floatToHalf(f)}; }},
    {"bf16", 16, [](uint32_t v) { return bf16BitsToFloat(static_cast<uint16_t>(v)); },
     [](float f) { return uint32_t{floatToBf16Bits(f)}; },
     [](uint32_t v) { return bfloat16ToFloat(static_cast<uint16_t>(v)); },
     [](float f) { return uint32_t{floatToBfloat16(f)}; }},
    {"e4m3", 8, [](uint32_t v) { return e4m3BitsToFloat(static_cast<uint8_t>(v)); },
     [](float f) { return uint32_t{floatToE4m3Bits(f)}; },
     [](uint32_t v) { return fp8E4M3ToFloat(static_cast<uint8_t>(v)); },
     [](float f) { return uint32_t{floatToFp8E4M3(f)}; }},
    {"e5m2", 8, [](uint32_t v) { return e5m2BitsToFloat(static_cast<uint8_t>(v)); },
     [](float f) { return uint32_t{floatToFp8E5M2(f)}; },
     [](uint32_t v) { return fp8E5M2ToFloat(static_cast<uint8_t>(v)); },
     [](float f) { return uint32_t{floatToFp8E5M2(f)}; }},
};

void expectSameEncoding(const Codec& c, float f) {
  uint32_t fast = c.fastEncode(f), ref = c.refEncode(f);
  if (std::isnan(c.refDecode(ref))) {
    EXPECT_TRUE(std::isnan(c.fastDecode(fast))) << c.name << " " << f;
    EXPECT_EQ(fast, ref) << c.name << " NaN code";
  } else {
    EXPECT_EQ(fast, ref) << c.name << " value " << f << " bits " << std::hex << bitsOf(f);
  }
}

TEST(Conversions, EveryCodeDecodesIdentically) {
  for (const Codec& c : kCodecs) {
    for (uint32_t v = 0; v < (1u << c.bits); ++v) {
      float fast = c.fastDecode(v), ref = c.refDecode(v);
      if (std::isnan(ref)) {
        EXPECT_TRUE(std::isnan(fast)) << c.name << " " << v;
      } else {
        ASSERT_EQ(bitsOf(fast), bitsOf(ref)) << c.name << " code " << v;
      }
    }
  }
}

TEST(Conversions, EncodingAgreesAtEveryRoundingBoundary) {
  for (const Codec& c : kCodecs) {
    SCOPED_TRACE(c.name);
    int before = ::testing::Test::HasFailure();
    for (uint32_t v = 0; v < (1u << c.bits); ++v) {
      float x = c.refDecode(v);
      if (std::isnan(x)) continue;
      expectSameEncoding(c, x);
      // The midpoint to the next code up (exact in float), and one float ulp
      // either side of it: where rounding decisions flip.
      float y = c.refDecode(v + 1 < (1u << c.bits) ? v + 1 : v);
      if (std::isnan(y) || std::isinf(y) || std::isinf(x)) continue;
      float mid = x / 2 + y / 2;
      for (float f : {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)})
        expectSameEncoding(c, f);
      if (::testing::Test::HasFailure() != before) return;  // one report per codec
    }
  }
}

TEST(Conversions, EncodingAgreesOnSpecialAndRandomFloats) {
  std::mt19937 rng(7);
  std::vector<float> specials = {0.0f,
                                 -0.0f,
                                 INFINITY,
                                 -INFINITY,
                                 NAN,
                                 -NAN,
                                 std::numeric_limits<float>::max(),
                                 std::numeric_limits<float>::min(),
                                 std::numeric_limits<float>::denorm_min(),
                                 1e-30f,
                                 65520.0f,
                                 -65519.99f,
                                 448.0f,
                                 464.0f,
                                 57344.0f,
                                 61440.0f,
                                 3.0e38f};
  for (const Codec& c : kCodecs) {
    SCOPED_TRACE(c.name);
    for (float f : specials) expectSameEncoding(c, f);
    int before = ::testing::Test::HasFailure();
    for (int i = 0; i < 300000; ++i) {
      expectSameEncoding(c, floatOf(rng()));
      if (::testing::Test::HasFailure() != before) return;
    }
  }
}

// Scalar reference: decode with core, combine in the widest type, round once.
template <typename T>
std::vector<T> randomValues(std::mt19937_64& rng, size_t n, DataType t) {
  std::vector<T> v(n);
  for (auto& x : v) {
    uint64_t r = rng();
    if (t == DataType::kFloat32 || t == DataType::kFloat64) {
      x = static_cast<T>(static_cast<int64_t>(r % 2001) - 1000) / static_cast<T>(8);
    } else {
      x = static_cast<T>(r);
    }
  }
  return v;
}

float decodeRef(DataType t, uint64_t bits) {
  switch (t) {
    case DataType::kFloat16:
      return halfToFloat(static_cast<uint16_t>(bits));
    case DataType::kBfloat16:
      return bfloat16ToFloat(static_cast<uint16_t>(bits));
    case DataType::kFp8E4M3:
      return fp8E4M3ToFloat(static_cast<uint8_t>(bits));
    default:
      return fp8E5M2ToFloat(static_cast<uint8_t>(bits));
  }
}
uint64_t encodeRef(DataType t, float f) {
  switch (t) {
    case DataType::kFloat16:
      return floatToHalf(f);
    case DataType::kBfloat16:
      return floatToBfloat16(f);
    case DataType::kFp8E4M3:
      return floatToFp8E4M3(f);
    default:
      return floatToFp8E5M2(f);
  }
}

template <typename T>
void checkPlain(DataType t) {
  std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
  const size_t n = 1037;  // not a multiple of any vector width
  for (int o = 0; o < kNumReduceOps; ++o) {
    auto op = static_cast<ReduceOp>(o);
    SCOPED_TRACE(std::string(dataTypeName(t)) + " " + std::string(reduceOpName(op)));
    auto a = randomValues<T>(rng, n, t), b = randomValues<T>(rng, n, t);
    std::vector<T> out(n), inplace = a;
    reduce(t, op, out.data(), a.data(), b.data(), n);
    reduce(t, op, inplace.data(), inplace.data(), b.data(), n);  // dst aliases a
    for (size_t i = 0; i < n; ++i) {
      T want = chorus::testing::referenceCombine(op, a[i], b[i]);
      ASSERT_EQ(std::memcmp(&out[i], &want, sizeof(T)), 0) << i;
      ASSERT_EQ(std::memcmp(&inplace[i], &want, sizeof(T)), 0) << i;
    }
  }
}

template <typename S>
void checkNarrow(DataType t) {
  std::mt19937_64 rng(static_cast<uint64_t>(t) + 11);
  const size_t n = 1037;
  for (int o = 0; o < kNumReduceOps; ++o) {
    auto op = static_cast<ReduceOp>(o);
    SCOPED_TRACE(std::string(dataTypeName(t)) + " " + std::string(reduceOpName(op)));
    std::vector<S> a(n), b(n), out(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = static_cast<S>(rng());
      b[i] = static_cast<S>(rng());
    }
    reduce(t, op, out.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      float fa = decodeRef(t, a[i]), fb = decodeRef(t, b[i]);
      uint64_t want = encodeRef(t, chorus::testing::referenceCombine(op, fa, fb));
      if (std::isnan(decodeRef(t, want))) {
        ASSERT_TRUE(std::isnan(decodeRef(t, out[i]))) << i;
      } else {
        ASSERT_EQ(out[i], want) << i << ": " << fa << " , " << fb;
      }
    }
  }
}

// Every kernel test runs on the widest kernels this CPU has and on the
// portable baseline build.
class Reduce : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override { setKernelIsa(GetParam()); }
  void TearDown() override { setKernelIsa(KernelIsa::kAuto); }
};

INSTANTIATE_TEST_SUITE_P(Isa, Reduce, ::testing::Values(KernelIsa::kAuto, KernelIsa::kBaseline),
                         [](const auto& param) {
                           return std::string(param.param == KernelIsa::kAuto ? "Auto"
                                                                              : "Baseline");
                         });

TEST(KernelIsa, BaselineCanBeForced) {
  setKernelIsa(KernelIsa::kBaseline);
  EXPECT_STREQ(kernelIsaName(DataType::kFloat16), "baseline");
  setKernelIsa(KernelIsa::kAuto);
}

TEST_P(Reduce, EveryTypeAndOpMatchesTheScalarReference) {
  checkPlain<int8_t>(DataType::kInt8);
  checkPlain<uint8_t>(DataType::kUint8);
  checkPlain<int32_t>(DataType::kInt32);
  checkPlain<uint32_t>(DataType::kUint32);
  checkPlain<int64_t>(DataType::kInt64);
  checkPlain<uint64_t>(DataType::kUint64);
  checkPlain<float>(DataType::kFloat32);
  checkPlain<double>(DataType::kFloat64);
  checkNarrow<uint16_t>(DataType::kFloat16);
  checkNarrow<uint16_t>(DataType::kBfloat16);
  checkNarrow<uint8_t>(DataType::kFp8E4M3);
  checkNarrow<uint8_t>(DataType::kFp8E5M2);
}

TEST_P(Reduce, IntegerArithmeticWraps) {
  int32_t a[2] = {INT32_MAX, INT32_MIN}, b[2] = {1, -1}, out[2];
  reduce(DataType::kInt32, ReduceOp::kSum, out, a, b, 2);
  EXPECT_EQ(out[0], INT32_MIN);
  EXPECT_EQ(out[1], INT32_MAX);
  uint8_t x[1] = {200}, y[1] = {3}, z[1];
  reduce(DataType::kUint8, ReduceOp::kProd, z, x, y, 1);
  EXPECT_EQ(z[0], static_cast<uint8_t>(600));
}

TEST_P(Reduce, MaxAndMinIgnoreASingleNaN) {
  float snan = std::numeric_limits<float>::signaling_NaN();
  float a[4] = {NAN, 1.0f, NAN, 3.0f}, b[4] = {2.0f, NAN, NAN, snan}, out[4];
  reduce(DataType::kFloat32, ReduceOp::kMax, out, a, b, 4);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], 3.0f);
  reduce(DataType::kFloat32, ReduceOp::kMin, out, a, b, 4);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], 3.0f);
}

TEST_P(Reduce, FusedRunEqualsOneByOne) {
  // fp16 sums round after each source, so reduceMany must match a chain of
  // reduce() calls bit for bit (docs/spec/IR.md: results equal fused or not).
  std::mt19937_64 rng(3);
  const size_t n = 513;
  std::vector<std::vector<uint16_t>> src(5, std::vector<uint16_t>(n));
  for (auto& s : src)
    for (auto& x : s)
      x = floatToHalf(static_cast<float>(static_cast<int>(rng() % 4001) - 2000) / 7.0f);
  std::vector<uint16_t> fused = src[0], chained = src[0];
  const void* ptrs[4] = {src[1].data(), src[2].data(), src[3].data(), src[4].data()};
  reduceMany(DataType::kFloat16, ReduceOp::kSum, fused.data(), ptrs, 4, n);
  for (int k = 1; k < 5; ++k)
    reduce(DataType::kFloat16, ReduceOp::kSum, chained.data(), chained.data(), src[k].data(), n);
  EXPECT_EQ(fused, chained);
}

TEST_P(Reduce, AverageDividesAfterTheSum) {
  int32_t ints[3] = {7, -7, 9};
  divideInPlace(DataType::kInt32, ints, 3, 2);
  EXPECT_EQ(ints[0], 3);
  EXPECT_EQ(ints[1], -3);  // truncates toward zero
  EXPECT_EQ(ints[2], 4);
  uint16_t h[2] = {floatToHalf(6.0f), floatToHalf(1.0f)};
  divideInPlace(DataType::kFloat16, h, 2, 4);
  EXPECT_EQ(halfToFloat(h[0]), 1.5f);
  EXPECT_EQ(halfToFloat(h[1]), 0.25f);
  double d[1] = {10.0};
  divideInPlace(DataType::kFloat64, d, 1, 4);
  EXPECT_EQ(d[0], 2.5);
}

}  // namespace
}  // namespace chorus::runtime
