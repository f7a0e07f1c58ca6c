// The scalar reference for one reduction step, shared by the kernel and
// collective tests: integers wrap, floats follow reduce.h's documented
// semantics (max/min ignore a NaN operand unless both are NaN).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/types.h"

namespace chorus::testing {

template <typename T>
T referenceCombine(ReduceOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case ReduceOp::kProd:
        return static_cast<T>(static_cast<uint64_t>(static_cast<U>(a)) * static_cast<U>(b));
      case ReduceOp::kMax:
        return std::max(a, b);
      case ReduceOp::kMin:
        return std::min(a, b);
    }
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return a + b;
      case ReduceOp::kProd:
        return a * b;
      // A NaN operand (quiet or signaling) is ignored unless both are NaN,
      // as documented in reduce.h (glibc's fmax returns NaN for a
      // signaling NaN, so it is not the reference).
      case ReduceOp::kMax:
        return std::isnan(a) ? b : std::isnan(b) ? a : (a < b ? b : a);
      case ReduceOp::kMin:
        return std::isnan(a) ? b : std::isnan(b) ? a : (b < a ? b : a);
    }
  }
  return T{};
}

}  // namespace chorus::testing
