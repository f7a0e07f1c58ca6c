// Comparing buffers of elements in tests, bit for bit.
#pragma once

#include <cstddef>
#include <cstring>

#include "core/elementwise.h"
#include "core/types.h"

namespace chorus::testing {

// Index of the first element of type t that differs in bits (both NaN
// counts as the same: IEEE 754 leaves a NaN's sign and payload to the
// machine), or n.
inline size_t firstDifference(DataType t, const unsigned char* got, const unsigned char* want,
                              size_t n) {
  size_t found = n;
  elem::withCodec(t, [&]<typename Codec>() {
    using S = typename Codec::Storage;
    for (size_t i = 0; i < n && found == n; ++i) {
      S g, w;
      std::memcpy(&g, got + i * sizeof(S), sizeof(S));
      std::memcpy(&w, want + i * sizeof(S), sizeof(S));
      if (std::memcmp(&g, &w, sizeof(S)) == 0) continue;
      auto gv = Codec::load(g), wv = Codec::load(w);
      if (gv != gv && wv != wv) continue;  // both NaN
      found = i;
    }
  });
  return found;
}

}  // namespace chorus::testing
