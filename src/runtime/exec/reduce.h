// Element-wise reductions: the arithmetic every reducing step (rrs, rrc,
// rrcs, re) of the executor performs, for every data type and op of
// src/core. Loops are written so the compiler vectorizes them; narrow
// floating-point types (fp16, bf16, fp8) are widened to float, combined and
// rounded back to nearest-even once per operation. Float has at least
// 2p+2 bits for each of these formats' p-bit significands, so rounding first
// to float and then to the narrow type gives the correctly rounded result for
// + and x (the double rounding is innocuous).
//
// Semantics per op:
//   sum, prod  integers wrap (two's complement); floats are IEEE.
//   max, min   floats ignore a NaN operand, quiet or signaling, unless both
//              are NaN (as CUDA's fmaxf/fminf do; glibc's fmax returns NaN
//              for a signaling NaN).
//   avg        reduces as sum; divideInPlace() then divides by the number of
//              contributions (integers truncate toward zero), as docs/spec/IR.md 7 says.
#pragma once

#include <cstddef>

#include "core/types.h"

namespace chorus::runtime {

// dst[i] = a[i] (op) b[i] for i < count. dst may equal a or b exactly
// (not partially overlap). avg is treated as sum.
void reduce(DataType type, ReduceOp op, void* dst, const void* a, const void* b, size_t count);

// dst[i] = dst[i] (op) src[0][i] (op) ... (op) src[n-1][i]: a fused
// multi-source reduction (docs/spec/IR.md section 2 runs of re). Narrow floats are
// rounded after each source, exactly as n separate reduce() calls would, so
// fused and unfused runs agree bit for bit.
void reduceMany(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                size_t count);

// buf[i] /= divisor: the second half of avg.
void divideInPlace(DataType type, void* buf, size_t count, int divisor);

// Which kernel builds reduce() may use. kAuto picks the widest the CPU
// supports (on x86-64: AVX2, and F16C for fp16); kBaseline forces the
// portable build, e.g. to test it or to compare. Thread-safe; affects calls
// that start after it returns.
enum class KernelIsa { kAuto, kBaseline };
void setKernelIsa(KernelIsa isa);
// The ISA reduce() uses for `type` now: "baseline", "avx2" or "avx2+f16c".
const char* kernelIsaName(DataType type);

// Fast, vectorizable conversions used by the kernels (bit-exact with the
// reference conversions in core/types.h; tests check every code and every
// rounding boundary).
float halfBitsToFloat(uint16_t h);
uint16_t floatToHalfBits(float f);
float bf16BitsToFloat(uint16_t b);
uint16_t floatToBf16Bits(float f);
float e4m3BitsToFloat(uint8_t v);
uint8_t floatToE4m3Bits(float f);
float e5m2BitsToFloat(uint8_t v);
uint8_t floatToE5m2Bits(float f);

}  // namespace chorus::runtime
