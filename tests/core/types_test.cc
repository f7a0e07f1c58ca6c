#include "core/types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace chorus {
namespace {

TEST(DataType, NamesRoundTripAndSizes) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    auto t = static_cast<DataType>(i);
    auto parsed = parseDataType(dataTypeName(t));
    ASSERT_TRUE(parsed.has_value()) << dataTypeName(t);
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_EQ(dataTypeSize(DataType::kBfloat16), 2u);
  EXPECT_EQ(dataTypeSize(DataType::kFp8E5M2), 1u);
  EXPECT_EQ(dataTypeSize(DataType::kUint64), 8u);
  EXPECT_EQ(parseDataType("half"), DataType::kFloat16);
  EXPECT_FALSE(parseDataType("fp12").has_value());
}

TEST(ReduceOp, Names) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    auto op = static_cast<ReduceOp>(i);
    EXPECT_EQ(parseReduceOp(reduceOpName(op)), op);
  }
  EXPECT_FALSE(parseReduceOp("xor").has_value());
}

TEST(Collective, NamesIncludingLegacySpelling) {
  EXPECT_EQ(parseCollective("reduce_scatter"), CollectiveKind::kReduceScatter);
  EXPECT_EQ(parseCollective("reducescatter"), CollectiveKind::kReduceScatter);
  EXPECT_EQ(parseCollective("alltoall"), CollectiveKind::kAllToAll);
  EXPECT_EQ(parseCollective("my_allreduce"), CollectiveKind::kCustom);
  EXPECT_EQ(collectiveName(CollectiveKind::kReduceScatter), "reducescatter");
  EXPECT_TRUE(isRooted(CollectiveKind::kBroadcast));
  EXPECT_FALSE(isRooted(CollectiveKind::kAllGather));
}

TEST(Half, KnownValues) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);                          // below the midpoint to 65536
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);                          // ties to even -> infinity
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);             // tie rounds to even (zero)
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::nanf("")))));
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
}

TEST(Bfloat16, KnownValues) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);        // tie -> even
  EXPECT_EQ(floatToBfloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);    // tie -> even (up)
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(bfloat16ToFloat(0xc040), -3.0f);
}

TEST(Fp8, KnownValuesAndSaturation) {
  EXPECT_EQ(floatToFp8E4M3(448.0f), 0x7e);
  EXPECT_EQ(floatToFp8E4M3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(floatToFp8E4M3(-1000.0f), 0xfe);
  EXPECT_EQ(floatToFp8E4M3(1.0f), 0x38);
  EXPECT_EQ(floatToFp8E4M3(std::ldexp(1.0f, -9)), 0x01);  // smallest subnormal
  EXPECT_EQ(floatToFp8E4M3(std::nanf("")), 0x7f);
  EXPECT_EQ(floatToFp8E5M2(57344.0f), 0x7b);
  EXPECT_EQ(floatToFp8E5M2(1e9f), 0x7b);  // saturates
  EXPECT_EQ(floatToFp8E5M2(1.0f), 0x3c);
  EXPECT_EQ(floatToFp8E5M2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(fp8E5M2ToFloat(0x7c), std::numeric_limits<float>::infinity());
}

// Every finite code decodes to a float that encodes back to the same code.
template <typename Enc, typename Dec>
void exhaustiveRoundTrip(int bits, Enc enc, Dec dec, const char* name) {
  int checked = 0;
  for (uint32_t code = 0; code < (1u << bits); ++code) {
    float f = dec(code);
    if (std::isnan(f)) continue;
    if (f == 0.0f && std::signbit(f) && code != (1u << (bits - 1))) FAIL() << name;
    EXPECT_EQ(static_cast<uint32_t>(enc(f)), code) << name << " code " << code << " value " << f;
    ++checked;
  }
  EXPECT_GT(checked, (1 << bits) * 9 / 10) << name;
}

TEST(NarrowFloats, ExhaustiveRoundTrip) {
  exhaustiveRoundTrip(16, floatToHalf, halfToFloat, "fp16");
  exhaustiveRoundTrip(16, floatToBfloat16, bfloat16ToFloat, "bf16");
  exhaustiveRoundTrip(8, floatToFp8E4M3, fp8E4M3ToFloat, "e4m3");
  // e5m2 infinities saturate on the way back, so skip them.
  exhaustiveRoundTrip(
      8,
      [](float f) { return std::isinf(f) ? (std::signbit(f) ? 0xfc : 0x7c) : floatToFp8E5M2(f); },
      fp8E5M2ToFloat, "e5m2");
}

TEST(NarrowFloats, MidpointsRoundToEven) {
  // Between consecutive fp16 codes, the exact midpoint goes to the even code.
  for (uint16_t code = 0x0400; code < 0x7bff; code += 97) {
    float lo = halfToFloat(code), hi = halfToFloat(static_cast<uint16_t>(code + 1));
    float mid = (lo + hi) / 2;  // exact in float
    uint16_t even = (code % 2 == 0) ? code : static_cast<uint16_t>(code + 1);
    EXPECT_EQ(floatToHalf(mid), even) << code;
  }
}

// The NCCL ABI's numbering (nccl.h: ncclInt8 0, ncclUint8 1, ncclInt32 2,
// ncclUint32 3, ncclInt64 4, ncclUint64 5, ncclFloat16 6, ncclFloat32 7,
// ncclFloat64 8, ncclBfloat16 9, ncclFloat8e4m3 10, ncclFloat8e5m2 11;
// ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4), which chorus.h
// shares and our own enums do not follow.
TEST(DataType, AbiCodesAreNcclsAndRoundTrip) {
  EXPECT_EQ(dataTypeFromAbi(6), DataType::kFloat16);
  EXPECT_EQ(dataTypeFromAbi(7), DataType::kFloat32);
  EXPECT_EQ(dataTypeFromAbi(9), DataType::kBfloat16);
  EXPECT_EQ(dataTypeFromAbi(11), DataType::kFp8E5M2);
  EXPECT_EQ(dataTypeFromAbi(12), std::nullopt);
  EXPECT_EQ(dataTypeFromAbi(-1), std::nullopt);
  for (int c = 0; c < kNumDataTypes; ++c) EXPECT_EQ(abiCode(*dataTypeFromAbi(c)), c);
  EXPECT_EQ(reduceOpFromAbi(4), ReduceOp::kAvg);
  EXPECT_EQ(reduceOpFromAbi(5), std::nullopt);
  for (int c = 0; c < kNumReduceOps; ++c) EXPECT_EQ(abiCode(*reduceOpFromAbi(c)), c);
}

}  // namespace
}  // namespace chorus
