// The step engine's Ctx in a CUDA block (see runtime/exec/engine.h): the
// block's threads share each step, the barrier and votes are
// __syncthreads's, and counters and flags are read and written with the
// PTX memory model's acquire / release / relaxed operations, at system
// scope where the launch's peers are other GPUs, else at GPU scope.
//
// Memory ordering, per protocol (engine.h has the layouts):
//   Simple  every thread writes its part of the slot, the block
//           synchronizes (bar.sync), and thread 0 stores head with
//           st.release: the barrier puts the other threads' stores in
//           causality order before thread 0's release, which is
//           cumulative over them. On the receiving side thread 0 loads head
//           with ld.acquire and the block synchronizes before any thread
//           reads the slot: acquire, then barrier, orders every reader's
//           loads after the writers' stores. (NCCL's Simple protocol posts
//           and waits the same way: one thread, then a barrier.)
//   LL      each 8-byte line is written by one st.relaxed of 64 bits and
//           read by one ld.relaxed of 64 bits: single-copy atomicity of an
//           aligned 8-byte access makes payload and flag arrive together;
//           a thread only uses a line whose flag it saw.
//   LL128   the block's threads store the payload words (st.relaxed), the
//           block synchronizes, then each line's flag is stored with
//           st.release (cumulative over the others' stores through the
//           barrier); readers load the flags with ld.acquire, the block
//           synchronizes (the vote), then they load the payload.
//   Freeing a slot (tail) and completing a step (the dependency counters)
//   follow Simple's pattern; the last block of a rank to finish takes a
//   fetch-add with acq_rel before dividing avg's output.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus::cuda {

// Scope: system where a launch's ranks span GPUs (a peer's counters and
// slots are another device's memory), the GPU where they all share one
// (cheaper fences, and L2 is the point of coherence). The control word the
// host writes is read outside the Ctx (world.cu), always as system memory.
struct DeviceCtx {
  bool system = true;

  __device__ __forceinline__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ int nthreads() const { return static_cast<int>(blockDim.x); }
  __device__ __forceinline__ bool all(bool x) const { return __syncthreads_and(x) != 0; }
  __device__ __forceinline__ bool any(bool x) const { return __syncthreads_or(x) != 0; }
  __device__ __forceinline__ void sync() const { __syncthreads(); }

  __device__ __forceinline__ uint64_t loadAcquire(const uint64_t* p) const {
    uint64_t v;
    if (system)
      asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    else
      asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ __forceinline__ uint64_t loadRelaxed(const uint64_t* p) const {
    uint64_t v;
    if (system)
      asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    else
      asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ __forceinline__ void storeRelease(uint64_t* p, uint64_t v) const {
    if (system)
      asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
    else
      asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ __forceinline__ void storeRelaxed(uint64_t* p, uint64_t v) const {
    if (system)
      asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
    else
      asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ __forceinline__ uint32_t fetchAddAcqRel(uint32_t* p, uint32_t v) const {
    uint32_t old;
    if (system)
      asm volatile("atom.acq_rel.sys.add.u32 %0, [%1], %2;"
                   : "=r"(old)
                   : "l"(p), "r"(v)
                   : "memory");
    else
      asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], %2;"
                   : "=r"(old)
                   : "l"(p), "r"(v)
                   : "memory");
    return old;
  }
};

}  // namespace chorus::cuda
