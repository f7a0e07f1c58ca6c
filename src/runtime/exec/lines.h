// LL and LL128 messages read and written in place: the step engine's data
// path for the two line protocols (docs/GPU-PERFORMANCE.md change 5).
//
// A step that receives and/or sends on LL or LL128 runs as one pass over
// its message in *units*: each thread loads a unit's payload from the
// incoming lines into registers, combines it with the local source, stores
// it to the local destination and packs it into the outgoing lines. No
// staging copy, no second pass over the slot (before this, a reducing and
// forwarding step went slot -> staging -> reduce -> staging -> slot).
//
//   LL     unit u = lines 2u and 2u + 1: 8 payload bytes. A line is one
//          8-byte word, 4 payload bytes below a 4-byte flag (the message's
//          sequence number), written and read by one single-copy-atomic
//          64-bit access, so data and flag arrive together.
//   LL128  unit u = piece u % 8 of line u / 8: 16 payload bytes (piece 7:
//          8 bytes, then the line's flag word). Eight consecutive threads
//          move one 128-byte line, so a warp's accesses are whole lines.
//          The payload is stored relaxed; after a block barrier each line's
//          flag is stored with release order (cumulative over the block's
//          stores through the barrier); a reader acquires every flag before
//          a barrier, then loads the payload.
//
// Units start at multiples of 8 payload bytes and elements never straddle
// one (element sizes divide 8), so a unit's elements combine as a Pack
// (reduce_copy.h) with the same codecs, bit for bit. A unit whose bytes
// span two chunks (a chunk's slice need not be a multiple of 8 bytes) is
// gathered and scattered in pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/elementwise.h"
#include "core/hd.h"
#include "core/types.h"
#include "ir/ir.h"
#include "runtime/exec/reduce_copy.h"

namespace chorus::runtime::ln {

inline constexpr size_t kLLPayload = 4;  // bytes per 8-byte LL line
inline constexpr size_t kLLLine = 8;
inline constexpr size_t kLL128Payload = 120;  // bytes per 128-byte LL128 line
inline constexpr size_t kLL128Line = 128;
inline constexpr size_t kLL128Words = kLL128Line / 8;
inline constexpr size_t kLL128Pieces = 8;  // 16-byte pieces (threads) per LL128 line

// LL flags: the message's sequence number, never 0 (fresh slots are zero).
CHORUS_HD_INLINE uint32_t llFlag(uint64_t seq) {
  return static_cast<uint32_t>(seq % 0xffffffffull) + 1u;
}

CHORUS_HD_INLINE size_t lineCount(ir::Protocol p, size_t msgBytes) {
  return p == ir::Protocol::kLL ? (msgBytes + kLLPayload - 1) / kLLPayload
                                : (msgBytes + kLL128Payload - 1) / kLL128Payload;
}

CHORUS_HD_INLINE size_t unitCount(ir::Protocol p, size_t msgBytes) {
  return p == ir::Protocol::kLL ? (msgBytes + 7) / 8 : lineCount(p, msgBytes) * kLL128Pieces;
}

// Payload bytes [at, at + len) of the message that unit u carries (len 0:
// an LL128 piece past the message's end).
CHORUS_HD_INLINE void unitRange(ir::Protocol p, size_t u, size_t msgBytes, size_t* at,
                                size_t* len) {
  size_t want = 8;
  if (p == ir::Protocol::kLL) {
    *at = u * 8;
  } else {
    size_t piece = u % kLL128Pieces;
    *at = u / kLL128Pieces * kLL128Payload + piece * 16;
    want = piece + 1 < kLL128Pieces ? 16 : 8;
  }
  size_t left = *at < msgBytes ? msgBytes - *at : 0;
  *len = left < want ? left : want;
}

// Whether message `seq` (1-based) is all in `lines`, as far as this thread
// can tell: it checks lines tid, tid + nthreads, ... (a block combines the
// answers with all(), whose barrier orders every thread's payload loads
// after the acquires).
template <class Ctx>
CHORUS_HD_INLINE bool arrived(const Ctx& ctx, ir::Protocol p, const uint64_t* lines, uint64_t seq,
                              size_t msgBytes) {
  const size_t n = lineCount(p, msgBytes);
  const auto step = static_cast<size_t>(ctx.nthreads());
  if (p == ir::Protocol::kLL) {
    uint32_t flag = llFlag(seq);
    for (size_t i = static_cast<size_t>(ctx.tid()); i < n; i += step)
      if (static_cast<uint32_t>(ctx.loadRelaxed(&lines[i]) >> 32) != flag) return false;
    return true;
  }
  for (size_t i = static_cast<size_t>(ctx.tid()); i < n; i += step)
    if (ctx.loadAcquire(&lines[i * kLL128Words + kLL128Words - 1]) != seq) return false;
  return true;
}

// LL128: stores the flag of every line of message `seq`, with release
// order. Called after a block barrier that follows every payload store.
template <class Ctx>
CHORUS_HD_INLINE void publishFlags(const Ctx& ctx, uint64_t* lines, uint64_t seq, size_t msgBytes) {
  const size_t n = lineCount(ir::Protocol::kLL128, msgBytes);
  for (size_t i = static_cast<size_t>(ctx.tid()); i < n; i += static_cast<size_t>(ctx.nthreads()))
    ctx.storeRelease(&lines[i * kLL128Words + kLL128Words - 1], seq);
}

// One step's pass over a message.
//   v = in (op src), or src when there is no in;  dst = v;  out = v
struct Job {
  ir::Protocol protocol = ir::Protocol::kLL;
  const uint64_t* in = nullptr;  // the received message's lines (null: none)
  uint64_t* out = nullptr;       // the lines of the message to send (null: none)
  uint64_t outSeq = 0;           // its sequence number (LL's flags)
  // Chunk k's bytes of the step's slice at src + k * stride (null: none);
  // so for dst. src and dst are the same or share no chunk.
  const unsigned char* src = nullptr;
  unsigned char* dst = nullptr;
  size_t stride = 0;      // bytes from a chunk's slice to the next chunk's
  size_t chunkBytes = 0;  // bytes of one chunk's slice
  size_t msgBytes = 0;    // the message: count x chunkBytes
  int only = -1;          // >= 0: only chunk `only`'s bytes are read and written (no out)
};

// Unit u's payload from the incoming lines.
template <class Ctx>
CHORUS_HD_INLINE rc::Pack loadUnit(const Ctx& ctx, ir::Protocol p, const uint64_t* lines, size_t u,
                                   size_t len) {
  rc::Pack k{{0, 0}};
  if (p == ir::Protocol::kLL) {
    uint64_t lo = static_cast<uint32_t>(ctx.loadRelaxed(&lines[2 * u]));
    uint64_t hi = len > kLLPayload ? static_cast<uint32_t>(ctx.loadRelaxed(&lines[2 * u + 1])) : 0;
    k.w[0] = lo | hi << 32;
    return k;
  }
  const uint64_t* w = lines + u / kLL128Pieces * kLL128Words + u % kLL128Pieces * 2;
  k.w[0] = ctx.loadRelaxed(&w[0]);
  if (len > 8) k.w[1] = ctx.loadRelaxed(&w[1]);
  return k;
}

// Unit u's payload into the outgoing lines (LL: with its flags).
template <class Ctx>
CHORUS_HD_INLINE void storeUnit(const Ctx& ctx, ir::Protocol p, uint64_t* lines, uint64_t seq,
                                size_t u, size_t len, const rc::Pack& k) {
  if (p == ir::Protocol::kLL) {
    uint64_t flag = static_cast<uint64_t>(llFlag(seq)) << 32;
    ctx.storeRelaxed(&lines[2 * u], flag | (k.w[0] & 0xffffffffull));
    if (len > kLLPayload) ctx.storeRelaxed(&lines[2 * u + 1], flag | k.w[0] >> 32);
    return;
  }
  uint64_t* w = lines + u / kLL128Pieces * kLL128Words + u % kLL128Pieces * 2;
  ctx.storeRelaxed(&w[0], k.w[0]);
  if (len > 8) ctx.storeRelaxed(&w[1], k.w[1]);
}

// 8 bytes at an 8-byte aligned address (one access on a GPU).
CHORUS_HD_INLINE uint64_t load64(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint64_t*>(p);
#else
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
#endif
}
CHORUS_HD_INLINE void store64(unsigned char* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint64_t*>(p) = v;
#else
  std::memcpy(p, &v, 8);
#endif
}

// Message bytes [at, at + len) of a chunked buffer into pack bytes [at -
// from, ...) and back. A unit within one chunk at an 8-byte aligned address
// moves as words; otherwise byte by byte, chunk piece by chunk piece.
CHORUS_HD_INLINE void gather(rc::Pack& k, const unsigned char* base, const Job& j, size_t from,
                             size_t at, size_t len) {
  size_t c = at / j.chunkBytes, w = at % j.chunkBytes;
  const unsigned char* p = base + c * j.stride + w;
  auto* kb = reinterpret_cast<unsigned char*>(&k);
  if (at == from && w + len <= j.chunkBytes && reinterpret_cast<uintptr_t>(p) % 8 == 0 &&
      len % 8 == 0) {
    k.w[0] = load64(p);
    if (len > 8) k.w[1] = load64(p + 8);
    return;
  }
  for (size_t i = 0; i < len; ++i) {
    size_t m = at + i;
    kb[m - from] = base[m / j.chunkBytes * j.stride + m % j.chunkBytes];
  }
}

CHORUS_HD_INLINE void scatter(unsigned char* base, const Job& j, const rc::Pack& k, size_t from,
                              size_t at, size_t len) {
  size_t c = at / j.chunkBytes, w = at % j.chunkBytes;
  unsigned char* p = base + c * j.stride + w;
  const auto* kb = reinterpret_cast<const unsigned char*>(&k);
  if (at == from && w + len <= j.chunkBytes && reinterpret_cast<uintptr_t>(p) % 8 == 0 &&
      len % 8 == 0) {
    store64(p, k.w[0]);
    if (len > 8) store64(p + 8, k.w[1]);
    return;
  }
  for (size_t i = 0; i < len; ++i) {
    size_t m = at + i;
    base[m / j.chunkBytes * j.stride + m % j.chunkBytes] = kb[m - from];
  }
}

// Thread tid's share of job `j` (elements of type t combined with op when
// the job both receives and has a source; avg combines as sum). One body
// per Ctx: the combination is a call per unit (rc::combine), so the CUDA
// file does not compile this loop once per type and op.
template <class Ctx>
CHORUS_HD_NOINLINE void run(const Ctx& ctx, DataType t, ReduceOp op, const Job& j) {
  const bool reduces = j.in != nullptr && j.src != nullptr;
  const size_t units = unitCount(j.protocol, j.msgBytes);
  const size_t lo = j.only >= 0 ? static_cast<size_t>(j.only) * j.chunkBytes : 0;
  const size_t hi = j.only >= 0 ? lo + j.chunkBytes : j.msgBytes;
  for (size_t u = static_cast<size_t>(ctx.tid()); u < units;
       u += static_cast<size_t>(ctx.nthreads())) {
    size_t at = 0, len = 0;
    unitRange(j.protocol, u, j.msgBytes, &at, &len);
    // The bytes this pass reads and writes (all of the unit's unless
    // j.only picks one chunk).
    size_t b = at > lo ? at : lo, e = at + len < hi ? at + len : hi;
    if (b >= e) continue;
    rc::Pack v{{0, 0}};
    if (j.in != nullptr) {
      v = loadUnit(ctx, j.protocol, j.in, u, len);
      if (reduces) {
        rc::Pack s{{0, 0}};
        gather(s, j.src, j, at, b, e - b);
        v = rc::combine(t, op, v, s);
      }
    } else {
      gather(v, j.src, j, at, b, e - b);
    }
    if (j.dst != nullptr) scatter(j.dst, j, v, at, b, e - b);
    if (j.out != nullptr) storeUnit(ctx, j.protocol, j.out, j.outSeq, u, len, v);
  }
}

}  // namespace chorus::runtime::ln
