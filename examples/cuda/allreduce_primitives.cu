// A small allreduce written directly on Chorus's GPU primitives
// (include/chorus/gpu.hpp): N ranks on one GPU, one CUDA block each, all
// in one cooperative launch so every block runs at once.
//
//   rank r puts its input into every peer's slot r and signals it;
//   waits for every peer's signal; sums its input and the N-1 slots.
//
// Then the same with LL packets (no signals: the flags say when data is
// there). Checks every element exactly (small integers in fp32) and prints
// "ok". Exit 77 (CTest's skip) without a GPU.
//
//   example_allreduce_primitives [RANKS] [COUNT]
#include <chorus/gpu.hpp>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using chorus::gpu::Channel;

// Rank r's registered buffer: [input: count][slot 0: count] ... [slot n-1: count]
// (its own slot unused), then the output computed from them.
__global__ void allreduce(const Channel* channels, int n, size_t count, float* const* outs,
                          int round, bool packets) {
  int r = static_cast<int>(blockIdx.x);
  size_t bytes = count * sizeof(float);
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    const Channel& c = channels[r * n + p];
    if (packets)
      c.putPackets(static_cast<size_t>(r) * ((bytes + 3) / 4), 0, bytes,
                   static_cast<uint32_t>(round + 1));
    else
      c.put(bytes * static_cast<size_t>(1 + r), 0, bytes);
  }
  for (int p = 0; p < n && !packets; ++p)
    if (p != r) channels[r * n + p].signal();
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    const Channel& c = channels[r * n + p];
    if (packets)
      c.getPackets(bytes * static_cast<size_t>(1 + p), static_cast<size_t>(p) * ((bytes + 3) / 4),
                   bytes, static_cast<uint32_t>(round + 1));
    else
      c.wait();
  }
  const auto* mine = reinterpret_cast<const float*>(channels[r * n + (r + 1) % n].local.buffer);
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
    float sum = mine[i];
    for (int p = 0; p < n; ++p)
      if (p != r) sum += mine[count * static_cast<size_t>(1 + p) + i];
    outs[r][i] = sum;
  }
}

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 4;
  size_t count = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 4096;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("skipped: no GPU\n");
    return 77;
  }
  if (n < 2 || count == 0) return 2;
  chorus::gpu::Connections conns(std::vector<int>(static_cast<size_t>(n), 0),
                                 static_cast<size_t>(n) * count * sizeof(float));
  if (conns.error() != cudaSuccess) {
    std::printf("setup: %s\n", conns.what().c_str());
    return 1;
  }
  size_t elems = count * static_cast<size_t>(1 + n);
  std::vector<float*> bufs(static_cast<size_t>(n)), outs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    CHECK(cudaMalloc(&bufs[static_cast<size_t>(r)], elems * sizeof(float)));
    CHECK(cudaMalloc(&outs[static_cast<size_t>(r)], count * sizeof(float)));
    conns.registerMemory(r, bufs[static_cast<size_t>(r)], elems * sizeof(float));
  }
  std::vector<Channel> channels(static_cast<size_t>(n * n));
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) channels[static_cast<size_t>(r * n + p)] = conns.channel(r, p);
  Channel* dChannels = nullptr;
  float** dOuts = nullptr;
  CHECK(cudaMalloc(&dChannels, channels.size() * sizeof(Channel)));
  CHECK(cudaMalloc(&dOuts, outs.size() * sizeof(float*)));
  CHECK(cudaMemcpy(dChannels, channels.data(), channels.size() * sizeof(Channel),
                   cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dOuts, outs.data(), outs.size() * sizeof(float*), cudaMemcpyHostToDevice));

  int bad = 0;
  for (int round = 0; round < 4; ++round) {
    bool packets = round % 2 == 1;
    // Inputs distinct per rank, element and round: exact in fp32.
    for (int r = 0; r < n; ++r) {
      std::vector<float> in(count);
      for (size_t i = 0; i < count; ++i)
        in[i] = static_cast<float>(r * 1000 + static_cast<int>(i % 997) + round);
      CHECK(cudaMemcpy(bufs[static_cast<size_t>(r)], in.data(), count * sizeof(float),
                       cudaMemcpyHostToDevice));
    }
    size_t nn = count;
    void* args[] = {&dChannels, &n, &nn, &dOuts, &round, &packets};
    CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(allreduce), dim3(n), dim3(256),
                                      args, 0, nullptr));
    CHECK(cudaDeviceSynchronize());
    for (int r = 0; r < n; ++r) {
      std::vector<float> out(count);
      CHECK(cudaMemcpy(out.data(), outs[static_cast<size_t>(r)], count * sizeof(float),
                       cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int p = 0; p < n; ++p)
          want += static_cast<float>(p * 1000 + static_cast<int>(i % 997) + round);
        if (out[i] != want && bad++ < 5)
          std::printf("round %d (%s) rank %d element %zu: %g, want %g\n", round,
                      packets ? "packets" : "put/signal/wait", r, i, out[i], want);
      }
    }
  }
  for (float* p : bufs) cudaFree(p);
  for (float* p : outs) cudaFree(p);
  cudaFree(dChannels);
  cudaFree(dOuts);
  std::printf("%s: %d ranks x %zu floats, put/signal/wait and packets\n", bad ? "FAILED" : "ok", n,
              count);
  return bad ? 1 : 0;
}
