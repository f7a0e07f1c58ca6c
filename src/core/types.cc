#include "core/types.h"

#include <array>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

namespace chorus {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  size_t size;
  bool floating;
};

constexpr std::array<TypeInfo, kNumDataTypes> kTypes = {{
    {DataType::kInt8, "int8", 1, false},
    {DataType::kUint8, "uint8", 1, false},
    {DataType::kInt32, "int32", 4, false},
    {DataType::kUint32, "uint32", 4, false},
    {DataType::kInt64, "int64", 8, false},
    {DataType::kUint64, "uint64", 8, false},
    {DataType::kFloat16, "fp16", 2, true},
    {DataType::kBfloat16, "bf16", 2, true},
    {DataType::kFloat32, "fp32", 4, true},
    {DataType::kFloat64, "fp64", 8, true},
    {DataType::kFp8E4M3, "fp8e4m3", 1, true},
    {DataType::kFp8E5M2, "fp8e5m2", 1, true},
}};

constexpr std::array<std::string_view, kNumReduceOps> kOps = {"sum", "prod", "max", "min", "avg"};

// A binary floating-point format with `expBits` exponent and `manBits`
// mantissa bits. Encodes |value| (sign handled by callers) with
// round-to-nearest-even; `maxFinite` is the largest finite magnitude.
struct MiniFloat {
  int expBits;
  int manBits;
  bool hasInf;    // all-ones exponent with zero mantissa means infinity
  bool saturate;  // overflow -> maxFinite instead of infinity
  double maxFinite;
  uint32_t nanCode;  // magnitude bits of the canonical NaN

  int bias() const { return (1 << (expBits - 1)) - 1; }
  int signShift() const { return expBits + manBits; }

  uint32_t encode(double f) const {
    uint32_t sign = std::signbit(f) ? (1u << signShift()) : 0u;
    if (std::isnan(f)) return sign | nanCode;
    double a = std::fabs(f);
    uint32_t infCode = ((1u << expBits) - 1) << manBits;
    if (std::isinf(a)) return sign | (hasInf && !saturate ? infCode : encodeFinite(maxFinite));
    if (a == 0) return sign;
    int e = 0;
    std::frexp(a, &e);
    int unbiased = std::max(e - 1, 1 - bias());
    double quantum = std::ldexp(1.0, unbiased - manBits);
    double rounded = std::nearbyint(a / quantum) * quantum;  // default mode: ties to even
    if (rounded > maxFinite) {
      // IEEE overflow: values at or past maxFinite + half a quantum go to infinity.
      if (hasInf && !saturate) return sign | infCode;
      return sign | encodeFinite(maxFinite);
    }
    return sign | encodeFinite(rounded);
  }

  // `a` must be exactly representable and finite.
  uint32_t encodeFinite(double a) const {
    if (a == 0) return 0;
    double minNormal = std::ldexp(1.0, 1 - bias());
    if (a < minNormal) {
      return static_cast<uint32_t>(a / std::ldexp(1.0, 1 - bias() - manBits));
    }
    int e = 0;
    double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    int unbiased = e - 1;
    uint32_t mant = static_cast<uint32_t>((m * 2 - 1) * std::ldexp(1.0, manBits));
    return (static_cast<uint32_t>(unbiased + bias()) << manBits) | mant;
  }

  double decode(uint32_t v) const {
    bool neg = (v >> signShift()) & 1u;
    uint32_t mag = v & ((1u << signShift()) - 1);
    uint32_t expField = mag >> manBits;
    uint32_t mant = mag & ((1u << manBits) - 1);
    double out;
    uint32_t expMax = (1u << expBits) - 1;
    if (hasInf && expField == expMax) {
      out = mant == 0 ? std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::quiet_NaN();
    } else if (!hasInf && mag == nanCode) {
      out = std::numeric_limits<double>::quiet_NaN();
    } else if (expField == 0) {
      out = std::ldexp(static_cast<double>(mant), 1 - bias() - manBits);
    } else {
      out = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -manBits),
                       static_cast<int>(expField) - bias());
    }
    return neg ? -out : out;
  }
};

constexpr MiniFloat kHalf{5, 10, true, false, 65504.0, 0x7e00};
constexpr MiniFloat kBf16{8, 7, true, false, 3.3895313892515355e38, 0x7fc0};
constexpr MiniFloat kE4M3{4, 3, false, true, 448.0, 0x7f};
constexpr MiniFloat kE5M2{5, 2, true, true, 57344.0, 0x7e};

}  // namespace

size_t dataTypeSize(DataType t) { return kTypes[static_cast<size_t>(t)].size; }
std::string_view dataTypeName(DataType t) { return kTypes[static_cast<size_t>(t)].name; }
bool isFloatingPoint(DataType t) { return kTypes[static_cast<size_t>(t)].floating; }

std::optional<DataType> parseDataType(std::string_view name) {
  for (const auto& t : kTypes) {
    if (t.name == name) return t.type;
  }
  // NCCL-style aliases.
  if (name == "half" || name == "float16") return DataType::kFloat16;
  if (name == "bfloat16") return DataType::kBfloat16;
  if (name == "float" || name == "float32") return DataType::kFloat32;
  if (name == "double" || name == "float64") return DataType::kFloat64;
  return std::nullopt;
}

std::string_view reduceOpName(ReduceOp op) { return kOps[static_cast<size_t>(op)]; }

std::optional<ReduceOp> parseReduceOp(std::string_view name) {
  for (size_t i = 0; i < kOps.size(); ++i) {
    if (kOps[i] == name) return static_cast<ReduceOp>(i);
  }
  return std::nullopt;
}

uint16_t floatToHalf(float f) { return static_cast<uint16_t>(kHalf.encode(f)); }
float halfToFloat(uint16_t h) { return static_cast<float>(kHalf.decode(h)); }

uint16_t floatToBfloat16(float f) {
  // float has the same exponent range as bf16, so the generic path is exact.
  return static_cast<uint16_t>(kBf16.encode(f));
}
float bfloat16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint8_t floatToFp8E4M3(float f) { return static_cast<uint8_t>(kE4M3.encode(f)); }
float fp8E4M3ToFloat(uint8_t v) { return static_cast<float>(kE4M3.decode(v)); }
uint8_t floatToFp8E5M2(float f) { return static_cast<uint8_t>(kE5M2.encode(f)); }
float fp8E5M2ToFloat(uint8_t v) { return static_cast<float>(kE5M2.decode(v)); }

namespace {

// Position = ABI code (nccl.h, chorus.h).
constexpr DataType kAbiTypes[] = {
    DataType::kInt8,    DataType::kUint8,    DataType::kInt32,   DataType::kUint32,
    DataType::kInt64,   DataType::kUint64,   DataType::kFloat16, DataType::kFloat32,
    DataType::kFloat64, DataType::kBfloat16, DataType::kFp8E4M3, DataType::kFp8E5M2,
};
constexpr ReduceOp kAbiOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin,
                                ReduceOp::kAvg};
static_assert(std::size(kAbiTypes) == kNumDataTypes && std::size(kAbiOps) == kNumReduceOps);

}  // namespace

std::optional<DataType> dataTypeFromAbi(int code) {
  if (code < 0 || code >= kNumDataTypes) return std::nullopt;
  return kAbiTypes[code];
}

int abiCode(DataType t) {
  for (int c = 0; c < kNumDataTypes; ++c)
    if (kAbiTypes[c] == t) return c;
  return kNumDataTypes;
}

std::optional<ReduceOp> reduceOpFromAbi(int code) {
  if (code < 0 || code >= kNumReduceOps) return std::nullopt;
  return kAbiOps[code];
}

int abiCode(ReduceOp op) {
  for (int c = 0; c < kNumReduceOps; ++c)
    if (kAbiOps[c] == op) return c;
  return kNumReduceOps;
}

}  // namespace chorus
