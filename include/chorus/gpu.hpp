// Chorus GPU primitives: one-sided channels between ranks, for writing
// communication kernels of your own (the layer the CUDA executor's ideas
// come from; MSCCL++ argues for exposing it). Header-only, CUDA runtime API.
//
// Host side: a `Connections` object for the ranks of this process (all on
// one GPU, or one GPU each with peer access) registers each rank's device
// buffer and hands out `Channel`s. Ranks in other processes exchange their
// buffers with `exportMemory` / `importMemory` (CUDA IPC handles: send the
// 64 bytes through your own bootstrap) and build channels with
// `Channel::make`.
//
// Device side: a Channel from rank A to rank B lets A's kernel
//   put(dst, src, bytes)   copy from A's registered memory into B's,
//   signal()               publish A's puts so far to B (release),
//   wait()                 wait for B's next signal to A (acquire),
//   flush()                make A's puts visible system-wide,
//   putPackets / getPackets  LL packets: 4 payload bytes and a 4-byte flag
//                          written by one 8-byte store, so the receiver
//                          needs no separate signal.
// put, signal, wait and the packet calls are called by every thread of a
// block together (they synchronize the block); flush by any thread.
//
// Memory ordering: signal() = every thread fences (__threadfence_system),
// the block synchronizes, thread 0 stores its count of signals sent on this
// channel into the peer's semaphore word for this rank with st.release at
// system scope (one writer per word, so the count only grows); wait() =
// thread 0 spins on its word for the peer with ld.acquire until it reaches
// the count it expects, then the block synchronizes. Packets: a line is written by one 64-bit
// st.relaxed and read by one 64-bit ld.relaxed (single-copy atomic), so payload and flag arrive
// together.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace chorus::gpu {

// What one rank offers its peers: its registered buffer, its semaphores
// (one 8-byte word per peer rank, zeroed: rank p's signals land in word p)
// and its packet buffer (the peers' packets land there).
struct Endpoint {
  unsigned char* buffer = nullptr;
  size_t bytes = 0;
  uint64_t* semaphore = nullptr;  // nranks words
  uint64_t* packets = nullptr;    // 8-byte lines
  size_t packetLines = 0;
};

struct Channel {
  Endpoint local;   // this rank's; local.semaphore: the word the peer signals
  Endpoint remote;  // the peer's, mapped here; remote.semaphore: the word this rank signals
  uint64_t* counters = nullptr;  // [0]: signals sent, [1]: signals waited for (this rank's memory)

  // The channel from rank `meRank` (endpoint `me`) to rank `peerRank`
  // (`peer`); `counters`: two zeroed uint64 of me's device memory, used by
  // this channel alone.
  static Channel make(const Endpoint& me, int meRank, const Endpoint& peer, int peerRank,
                      uint64_t* counters) {
    Channel c;
    c.local = me;
    c.remote = peer;
    c.local.semaphore = me.semaphore + peerRank;
    c.remote.semaphore = peer.semaphore + meRank;
    c.counters = counters;
    return c;
  }

#if defined(__CUDACC__)
  __device__ void put(size_t dstOff, size_t srcOff, size_t bytes) const {
    unsigned char* dst = remote.buffer + dstOff;
    const unsigned char* src = local.buffer + srcOff;
    auto both = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
    size_t done = 0;
    if (both % 16 == 0) {
      size_t n = bytes / 16;
      for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
      done = n * 16;
    }
    for (size_t i = done + threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
  }

  __device__ void signal() const {
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
      uint64_t n = counters[0] + 1;
      counters[0] = n;
      asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(remote.semaphore), "l"(n) : "memory");
    }
    __syncthreads();
  }

  __device__ void wait() const {
    if (threadIdx.x == 0) {
      uint64_t want = counters[1] + 1;
      uint64_t got = 0;
      do {
        asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(got) : "l"(local.semaphore) : "memory");
      } while (got < want);
      counters[1] = want;
    }
    __syncthreads();
  }

  __device__ void flush() const { __threadfence_system(); }

  // `bytes` from local.buffer + srcOff into the peer's packet lines from
  // `line` on (one line per 4 bytes), each carrying `flag` (never 0; use a
  // new flag per round, e.g. the round number + 1).
  __device__ void putPackets(size_t line, size_t srcOff, size_t bytes, uint32_t flag) const {
    size_t lines = (bytes + 3) / 4;
    for (size_t i = threadIdx.x; i < lines; i += blockDim.x) {
      uint32_t data = 0;
      size_t len = bytes - i * 4 < 4 ? bytes - i * 4 : 4;
      memcpy(&data, local.buffer + srcOff + i * 4, len);
      uint64_t v = (static_cast<uint64_t>(flag) << 32) | data;
      asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(remote.packets + line + i), "l"(v)
                   : "memory");
    }
    __syncthreads();
  }

  // Waits until this rank's packet lines from `line` on carry `flag`, and
  // copies their `bytes` of payload to local.buffer + dstOff.
  __device__ void getPackets(size_t dstOff, size_t line, size_t bytes, uint32_t flag) const {
    size_t lines = (bytes + 3) / 4;
    for (size_t i = threadIdx.x; i < lines; i += blockDim.x) {
      uint64_t v;
      do {
        asm volatile("ld.relaxed.sys.u64 %0, [%1];"
                     : "=l"(v)
                     : "l"(local.packets + line + i)
                     : "memory");
      } while (static_cast<uint32_t>(v >> 32) != flag);
      auto data = static_cast<uint32_t>(v);
      size_t len = bytes - i * 4 < 4 ? bytes - i * 4 : 4;
      memcpy(local.buffer + dstOff + i * 4, &data, len);
    }
    __syncthreads();
  }
#endif
};

// The ranks of this process: each rank's endpoint (semaphore and packet
// buffer allocated here, on its GPU) and channel counters. Peers on one GPU
// share pointers directly; on different GPUs peer access is enabled.
class Connections {
 public:
  // `devices[r]`: rank r's GPU. `packetBytes`: each rank's packet buffer.
  Connections(std::vector<int> devices, size_t packetBytes = size_t{1} << 20)
      : devices_(std::move(devices)), ends_(devices_.size()), counters_(devices_.size(), nullptr) {
    size_t n = devices_.size();
    for (size_t r = 0; r < n && err_ == cudaSuccess; ++r) {
      Endpoint& e = ends_[r];
      e.packetLines = packetBytes / 4;
      check(cudaSetDevice(devices_[r]), "cudaSetDevice");
      check(cudaMalloc(&e.semaphore, n * sizeof(uint64_t)), "cudaMalloc");
      check(cudaMalloc(&e.packets, e.packetLines * 8), "cudaMalloc");
      check(cudaMalloc(&counters_[r], 2 * n * sizeof(uint64_t)), "cudaMalloc");
      if (err_ != cudaSuccess) break;
      check(cudaMemset(e.semaphore, 0, n * sizeof(uint64_t)), "cudaMemset");
      check(cudaMemset(e.packets, 0, e.packetLines * 8), "cudaMemset");
      check(cudaMemset(counters_[r], 0, 2 * n * sizeof(uint64_t)), "cudaMemset");
    }
    for (size_t a = 0; a < n && err_ == cudaSuccess; ++a)
      for (size_t b = 0; b < n && err_ == cudaSuccess; ++b) {
        if (devices_[a] == devices_[b]) continue;
        check(cudaSetDevice(devices_[a]), "cudaSetDevice");
        cudaError_t e = cudaDeviceEnablePeerAccess(devices_[b], 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
          cudaGetLastError();
          continue;
        }
        check(e, "cudaDeviceEnablePeerAccess");
      }
  }
  ~Connections() {
    for (Endpoint& e : ends_) {
      cudaFree(e.semaphore);
      cudaFree(e.packets);
    }
    for (uint64_t* c : counters_) cudaFree(c);
  }
  Connections(const Connections&) = delete;
  Connections& operator=(const Connections&) = delete;

  // Rank r's buffer: device memory of its GPU that its peers will put into.
  void registerMemory(int rank, void* ptr, size_t bytes) {
    ends_[static_cast<size_t>(rank)].buffer = static_cast<unsigned char*>(ptr);
    ends_[static_cast<size_t>(rank)].bytes = bytes;
  }
  const Endpoint& endpoint(int rank) const { return ends_[static_cast<size_t>(rank)]; }
  // The channel from `rank` to `peer`, for kernels on rank's GPU. Each
  // (rank, peer) pair has one channel: build it once and reuse it, since
  // its counters pair signal() with wait() across kernel launches.
  Channel channel(int rank, int peer) const {
    auto r = static_cast<size_t>(rank), p = static_cast<size_t>(peer);
    return Channel::make(ends_[r], rank, ends_[p], peer, counters_[r] + 2 * p);
  }
  // cudaSuccess, or the first error setting up (what() says where).
  cudaError_t error() const { return err_; }
  const std::string& what() const { return what_; }

 private:
  void check(cudaError_t e, const char* call) {
    if (e != cudaSuccess && err_ == cudaSuccess) {
      err_ = e;
      what_ = std::string(call) + ": " + cudaGetErrorString(e);
    }
  }
  std::vector<int> devices_;
  std::vector<Endpoint> ends_;
  std::vector<uint64_t*> counters_;
  cudaError_t err_ = cudaSuccess;
  std::string what_;
};

// Across processes: a device allocation's CUDA IPC handle (send its bytes to
// the peer through any bootstrap) and the peer's mapping of it. Export a
// rank's buffer, semaphore words and packet buffer this way, rebuild its
// Endpoint from the imported pointers and make channels with
// Channel::make.
struct IpcMemory {
  cudaIpcMemHandle_t handle;
  size_t bytes = 0;
};
inline cudaError_t exportMemory(void* base, size_t bytes, IpcMemory* out) {
  out->bytes = bytes;
  return cudaIpcGetMemHandle(&out->handle, base);
}
inline cudaError_t importMemory(const IpcMemory& in, void** ptr) {
  return cudaIpcOpenMemHandle(ptr, in.handle, cudaIpcMemLazyEnablePeerAccess);
}
inline cudaError_t closeImported(void* ptr) { return cudaIpcCloseMemHandle(ptr); }

}  // namespace chorus::gpu
