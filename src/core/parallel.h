// Work spread over the cores this process may run on: for the searches and
// simulations that are independent of each other (synth/search.cc,
// workflows/synthesis.cc).
#pragma once

#include <cstddef>
#include <functional>

namespace chorus {

// The cores this process may run on (its affinity mask), at least 1.
int usableCores();

// Runs fn(0) ... fn(n - 1) on up to `threads` threads (the caller's one of
// them), each taking the next index as it finishes one. fn must be safe to
// run concurrently with itself.
void parallelFor(size_t n, int threads, const std::function<void(size_t)>& fn);

}  // namespace chorus
