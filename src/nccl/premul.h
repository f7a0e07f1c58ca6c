// ncclRedOpCreatePreMulSum's first half: out[i] = in[i] * scalar in the
// data type's own arithmetic (core/elementwise.h: narrow floats multiply
// in float and round once, integers wrap), on the host or in a CUDA kernel.
// The sum that follows is an ordinary Chorus sum over the scaled copy.
#pragma once

#include <cstddef>

#include "core/elementwise.h"
#include "core/status.h"
#include "core/types.h"

namespace chorus::nccl {

// Elements [begin, end) with stride `step`; `scalar` points to one element
// of the same type.
struct ScaleRange {
  void* out;
  const void* in;
  const void* scalar;
  size_t begin, end, step;
  template <typename Codec>
  CHORUS_HD_INLINE void operator()() const {
    using S = typename Codec::Storage;
    using C = typename Codec::Compute;
    const S* x = static_cast<const S*>(in);
    S* y = static_cast<S*>(out);
    C k = Codec::load(*static_cast<const S*>(scalar));
    for (size_t i = begin; i < end; i += step)
      y[i] = Codec::store(elem::combine<ReduceOp::kProd, C>(Codec::load(x[i]), k));
  }
};

inline void scaleOnHost(DataType t, void* out, const void* in, size_t count, const void* scalar) {
  elem::withCodec(t, ScaleRange{out, in, scalar, 0, count, 1});
}

// The same on the GPU, enqueued on `stream` (a cudaStream_t). The scalar is
// read by the kernel from `deviceScalar` when it is non-null (device
// residence), else taken by value from the 8 bytes at `hostScalar`.
// kUnsupported with CUDA's words when the launch fails.
Status scaleOnDevice(DataType t, void* out, const void* in, size_t count, const void* hostScalar,
                     const void* deviceScalar, void* stream);

}  // namespace chorus::nccl
