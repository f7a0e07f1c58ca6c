// How a call's elements map onto an algorithm's chunks and slice iterations
// (docs/spec/IR.md section 3) and when a step's dependency is met (section 4): the one
// description the CPU executor, the simulator, the step engine and the CUDA
// executor all use, so they describe the same run.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/hd.h"

namespace chorus::ir {

// The most instances (runtime::FlatPlan::lower) a threadblock may run as.
inline constexpr int kMostInstances = 64;

struct Slicing {
  size_t elemSize = 0;
  size_t totalElems = 0;  // T = count x m
  size_t chunkElems = 0;  // S = T / nchunksperloop
  size_t sliceElems = 0;  // elements of each chunk per iteration
  size_t iterations = 0;  // ceil(S / sliceElems)

  // T elements in `nchunks` chunks, moved `sliceBytes` of each chunk per
  // iteration (at least one element). T must split into the chunks.
  CHORUS_HD static Slicing make(size_t elemSize, size_t totalElems, size_t nchunks,
                                size_t sliceBytes) {
    Slicing s;
    s.elemSize = elemSize;
    s.totalElems = totalElems;
    s.chunkElems = nchunks == 0 ? 0 : totalElems / nchunks;
    s.sliceElems = sliceBytes / elemSize > 0 ? sliceBytes / elemSize : 1;
    s.iterations = (s.chunkElems + s.sliceElems - 1) / s.sliceElems;
    return s;
  }
  // Elements of each chunk that iteration `iter` moves (the last may be short).
  CHORUS_HD size_t sliceLen(size_t iter) const {
    size_t left = chunkElems - iter * sliceElems;
    return left < sliceElems ? left : sliceElems;
  }
  // Element offset of chunk `chunk`'s slice at iteration `iter` in a buffer.
  CHORUS_HD size_t sliceOffset(size_t chunk, size_t iter) const {
    return chunk * chunkElems + iter * sliceElems;
  }
  // Bytes of the largest slice of one chunk (a chunk smaller than a slice
  // moves whole).
  CHORUS_HD size_t largestSliceBytes() const {
    return (sliceElems < chunkElems ? sliceElems : chunkElems) * elemSize;
  }
  // A step's `count` chunks are contiguous in its buffers at one iteration
  // when a chunk is one slice (or there is one chunk).
  CHORUS_HD bool contiguous(int count) const { return count == 1 || iterations == 1; }

  // Cuts the slices for `k` instances (runtime::FlatPlan::lower), each
  // running every k-th iteration: a k-th of the slice one instance would
  // move (so all instances' slots together hold what one instance's did,
  // and a chunk of one slice still feeds every instance), balanced so each
  // instance gets as many slices as the others, at least
  // kInstanceSliceBytes and whole 16-byte words where the element size
  // allows, never larger than before. k <= 1 leaves the slicing as it is.
  static constexpr size_t kInstanceSliceBytes = 4096;
  void splitForInstances(size_t k) {
    if (k <= 1 || chunkElems == 0 || elemSize == 0) return;
    auto ceilDiv = [](size_t a, size_t b) { return (a + b - 1) / b; };
    auto most = [](size_t a, size_t b) { return a < b ? b : a; };
    // Whole 16-byte words where the element size divides 16.
    const size_t word = elemSize < 16 && 16 % elemSize == 0 ? 16 / elemSize : 1;
    auto words = [&](size_t elems) { return most(ceilDiv(elems, word) * word, word); };
    const size_t least = words(kInstanceSliceBytes / elemSize);
    size_t elems = most(words(ceilDiv(sliceElems, k)), least);
    const size_t perInstance = ceilDiv(ceilDiv(chunkElems, elems), k);
    elems = most(words(ceilDiv(chunkElems, perInstance * k)), least);
    if (elems >= sliceElems) return;
    sliceElems = elems;
    iterations = ceilDiv(chunkElems, elems);
  }
};

// A step with dependency (depTb, depStep) at iteration `iter` may run once
// threadblock depTb has completed this many steps (it runs `depTbSteps`
// steps per iteration): its dependency's instance of the same iteration.
CHORUS_HD inline uint64_t stepsNeeded(size_t iter, size_t depTbSteps, int depStep) {
  return static_cast<uint64_t>(iter) * depTbSteps + static_cast<uint64_t>(depStep) + 1;
}

}  // namespace chorus::ir
