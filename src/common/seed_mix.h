// The 64-bit mixing every seeded draw in attnlab derives from (parameter init, batch order, junk
// injection): splitmix64's finaliser, and mix(h, v) = splitmix64(h ^ splitmix64(v)) to fold one more
// integer into a key. Changing either changes every run's initial weights and data order.
#pragma once

#include <cstdint>

namespace attnlab::seed_mix {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

inline uint64_t mix(uint64_t h, uint64_t v) { return splitmix64(h ^ splitmix64(v)); }

}  // namespace attnlab::seed_mix
