// Eviction for the caches of prepared calls (InProcessWorld, ProcessWorld): a call
// is keyed by its algorithm, shape and buffers, so a program that moves
// its buffers around would otherwise keep one entry (with its scratch) per
// buffer it ever used. At most kCachedCalls entries and kCachedBytes of
// their scratch are kept besides the newest; the least recently used go.
#pragma once

#include <algorithm>
#include <cstddef>

namespace chorus::api {

inline constexpr size_t kCachedCalls = 32;
inline constexpr size_t kCachedBytes = size_t{64} << 20;

// Makes room in `cache` (a map whose values have `call->bytes()` and
// `lastUse`) for an entry of `newBytes`; `*cachedBytes` is the scratch the
// cache holds, updated to include the new entry.
template <class Map>
void makeRoom(Map& cache, size_t newBytes, size_t* cachedBytes) {
  while (!cache.empty() &&
         (cache.size() >= kCachedCalls || *cachedBytes + newBytes > kCachedBytes)) {
    auto lru = std::min_element(cache.begin(), cache.end(), [](const auto& a, const auto& b) {
      return a.second.lastUse < b.second.lastUse;
    });
    *cachedBytes -= lru->second.call->bytes();
    cache.erase(lru);
  }
  *cachedBytes += newBytes;
}

}  // namespace chorus::api
