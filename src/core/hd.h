// Functions compiled for both the host and CUDA devices. Code shared by the
// CPU runtime and the CUDA executor (element arithmetic, slice geometry, the
// step engine) is marked CHORUS_HD so one source serves both compilers:
// under nvcc it is __host__ __device__, under a host compiler nothing.
#pragma once

#if defined(__CUDACC__)
#define CHORUS_HD __host__ __device__
#define CHORUS_HD_INLINE __host__ __device__ __forceinline__
// A device function of its own (a call, not inlined): big data loops stay
// out of the kernel's state machine, so neither one's registers limit the
// other's, and one body serves every kernel that calls it.
#define CHORUS_HD_NOINLINE __host__ __device__ __noinline__ inline
#else
#define CHORUS_HD
#define CHORUS_HD_INLINE inline
#define CHORUS_HD_NOINLINE inline
#endif
