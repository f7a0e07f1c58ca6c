// Reduction kernel throughput per data type, next to memcpy of the same
// buffer in the same run (this machine's speed drifts; compare rows of one
// run only). A reduce reads two buffers and writes one; memcpy reads one and
// writes one. bytes_per_second counts one buffer per iteration for both, so
// the ratio says how close a reduction runs to a plain copy.
//   build/release/bench/reduce_bench --benchmark_min_time=0.3
// CHORUS_KERNELS=baseline forces the portable kernels, for comparison.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/exec/reduce.h"

namespace {

constexpr size_t kBytes = 8 << 20;  // 8 MiB per buffer: well past the L2 cache

void memcpyBaseline(benchmark::State& state) {
  std::vector<char> a(kBytes, 1), b(kBytes, 2);
  for (auto _ : state) {
    std::memcpy(a.data(), b.data(), kBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}

void reduceKernel(benchmark::State& state, chorus::DataType t, chorus::ReduceOp op) {
  // Buffers of small integers in every type: no overflow to special values.
  std::vector<char> a(kBytes, 0), b(kBytes, 0);
  size_t n = kBytes / chorus::dataTypeSize(t);
  for (auto _ : state) {
    chorus::runtime::reduce(t, op, a.data(), a.data(), b.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("memcpy", memcpyBaseline)->Unit(benchmark::kMicrosecond);
  for (int i = 0; i < chorus::kNumDataTypes; ++i) {
    auto t = static_cast<chorus::DataType>(i);
    for (auto op : {chorus::ReduceOp::kSum, chorus::ReduceOp::kMax}) {
      std::string name = "reduce/" + std::string(chorus::dataTypeName(t)) + "/" +
                         std::string(chorus::reduceOpName(op));
      benchmark::RegisterBenchmark(name.c_str(), [t, op](benchmark::State& s) {
        reduceKernel(s, t, op);
      })->Unit(benchmark::kMicrosecond);
    }
    if (i % 3 == 2)
      benchmark::RegisterBenchmark("memcpy", memcpyBaseline)->Unit(benchmark::kMicrosecond);
  }
  if (const char* isa = std::getenv("CHORUS_KERNELS"); isa && std::string(isa) == "baseline")
    chorus::runtime::setKernelIsa(chorus::runtime::KernelIsa::kBaseline);
  benchmark::AddCustomContext(
      "kernels (fp16 / others)",
      std::string(chorus::runtime::kernelIsaName(chorus::DataType::kFloat16)) + " / " +
          chorus::runtime::kernelIsaName(chorus::DataType::kFloat32));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
