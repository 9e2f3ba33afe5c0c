// The 64-bit hashing attnlab's seeds and fingerprints derive from: splitmix64's finaliser,
// mix(h, v) = splitmix64(h ^ splitmix64(v)) to fold one more integer into a key (parameter init, batch
// order, junk injection), and FNV-1a over bytes (a parameter's name in its seed, the config hash, the
// validation fingerprint). Changing any of them changes every run's initial weights, data order or
// recorded hashes.
#pragma once

#include <cstdint>
#include <string_view>

namespace attnlab::seed_mix {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

inline uint64_t mix(uint64_t h, uint64_t v) { return splitmix64(h ^ splitmix64(v)); }

/// 64-bit FNV-1a: start from kFnv1aOffset, fold each byte in with fnv1a_byte().
inline constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ULL;
inline uint64_t fnv1a_byte(uint64_t h, uint64_t byte) { return (h ^ byte) * kFnv1aPrime; }
inline uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = kFnv1aOffset;
  for (unsigned char c : bytes) h = fnv1a_byte(h, c);
  return h;
}

}  // namespace attnlab::seed_mix
