#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "nccl/premul.h"

namespace chorus::nccl {
namespace {

struct Scalar {
  unsigned char bytes[8];
};

__global__ void scaleKernel(DataType t, void* out, const void* in, size_t count, Scalar value,
                            const void* deviceScalar) {
  const void* scalar = deviceScalar != nullptr ? deviceScalar : value.bytes;
  size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  elem::withCodec(t, ScaleRange{out, in, scalar, first, count, step});
}

}  // namespace

Status scaleOnDevice(DataType t, void* out, const void* in, size_t count, const void* hostScalar,
                     const void* deviceScalar, void* stream) {
  if (count == 0) return Status::ok();
  Scalar value{};
  if (deviceScalar == nullptr) std::memcpy(value.bytes, hostScalar, dataTypeSize(t));
  constexpr int kThreads = 256;
  size_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > 1024) blocks = 1024;
  // cudaLaunchKernel: this launch's own error, not an earlier one of the
  // application's that cudaGetLastError would also report.
  void* args[] = {&t, &out, &in, &count, &value, &deviceScalar};
  if (cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void*>(scaleKernel),
                                       dim3(static_cast<unsigned>(blocks)), dim3(kThreads), args, 0,
                                       static_cast<cudaStream_t>(stream));
      e != cudaSuccess)
    return Status(StatusCode::kUnsupported,
                  std::string("premulsum scaling kernel: ") + cudaGetErrorString(e));
  return Status::ok();
}

}  // namespace chorus::nccl
