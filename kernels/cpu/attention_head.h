// One (batch, head) slice of a fused attention call and the key tile both CPU passes load.
// Private to kernels/cpu.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attnlab_kernels/flash_attention.h"
#include "tile_math.h"

namespace attnlab::kernels::cpu {

/// Pointers of one (b, h); T is both the storage and the accumulator type on CPU.
template <class T>
struct HeadSlice {
  const T* q;          ///< [Tq, d]
  const T* k;          ///< [Tk, d]
  const T* v;          ///< [Tk, d]
  const T* bias;       ///< [Tk] routing bias or null
  const bool* mask;    ///< [Tk] key mask or null
  bool has_sink;
  T sink;              ///< b_h (0 for a sink without a pointer: off_by_one)
  T* o;                ///< [Tq, d]
  T* lse;              ///< [Tq]

  int64_t tq, tk, d;
  T scale;
  /// Absolute position of query i (queries are the last Tq of Tk positions).
  int64_t position(int64_t i) const { return tk - tq + i; }
  /// Keys of [j0, j0 + n) that query i may see by causality: min(n, position(i) + 1 - j0), maybe <= 0.
  int64_t visible(int64_t i, int64_t j0, int64_t n) const { return std::min(n, position(i) + 1 - j0); }
};

template <class T>
HeadSlice<T> head_slice(const AttentionShape& s, const ForwardArgs& a, int64_t b, int64_t h) {
  const int64_t bh = b * s.heads + h, d = s.head_dim;
  HeadSlice<T> hs;
  hs.q = static_cast<const T*>(a.q) + bh * s.q_len * d;
  hs.k = static_cast<const T*>(a.k) + bh * s.k_len * d;
  hs.v = static_cast<const T*>(a.v) + bh * s.k_len * d;
  hs.bias = s.has_routing_bias ? static_cast<const T*>(a.routing_bias) + bh * s.k_len : nullptr;
  hs.mask = s.has_key_mask ? a.key_mask + b * s.k_len : nullptr;
  hs.has_sink = s.has_sink;
  hs.sink = (s.has_sink && a.sink_logit) ? static_cast<const T*>(a.sink_logit)[h] : T(0);
  hs.o = static_cast<T*>(a.o) + bh * s.q_len * d;
  hs.lse = static_cast<T*>(a.lse) + bh * s.q_len;
  hs.tq = s.q_len, hs.tk = s.k_len, hs.d = d;
  hs.scale = static_cast<T>(s.scale);
  return hs;
}

/// A tile of up to `cap` keys starting at j0: the keys transposed ([d][ld], ld = cap rounded up to a
/// register line, zero-padded) for the score product, and the additive term of each key's logit
/// (routing bias; -inf for a masked key and for the padding).
template <class T>
struct KeyTile {
  int64_t j0 = 0, n = 0, cap, ld;
  std::vector<T> kT, add;

  KeyTile(int64_t cap_, int64_t d)
      : cap(cap_), ld(round_up_lanes<T>(cap_)), kT(static_cast<size_t>(ld * d), T(0)), add(static_cast<size_t>(ld)) {}

  ATTNLAB_INLINE void load(const HeadSlice<T>& hs, int64_t first, int64_t count) {
    if (count < n) std::fill(kT.begin(), kT.end(), T(0));  // a shorter last tile: clear stale columns
    j0 = first, n = count;
    transpose_tile(hs.k + first * hs.d, n, hs.d, ld, kT.data());
    for (int64_t j = 0; j < n; ++j) {
      const bool kept = !hs.mask || hs.mask[first + j];
      add[j] = !kept ? neg_inf<T>() : hs.bias ? hs.bias[first + j] : T(0);
    }
    std::fill(add.begin() + n, add.end(), neg_inf<T>());
  }
};

}  // namespace attnlab::kernels::cpu
