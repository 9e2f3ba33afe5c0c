// One (batch, head) slice of a fused attention call and the key tile both CPU passes load.
// Private to kernels/cpu.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attnlab_kernels/flash_attention.h"
#include "attnlab_kernels/window_rule.h"
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
  int64_t window;  ///< W of a local layer; 0: none, also when it hides no key of the call (Tk <= W + n)
  int64_t keep;    ///< n: keys j < n every query sees (with a window)

  /// Absolute position of query i (queries are the last Tq of Tk positions).
  int64_t position(int64_t i) const { return tk - tq + i; }
  /// Keys of [j0, j0 + n) that query i may see by causality: min(n, position(i) + 1 - j0), maybe <= 0.
  int64_t visible(int64_t i, int64_t j0, int64_t n) const { return std::min(n, position(i) + 1 - j0); }
  /// The oldest key of query i's window (with a window): position(i) - W + 1, maybe negative.
  int64_t window_start(int64_t i) const { return position(i) - window + 1; }

  /// Sets s[j - j0] = -inf for the keys of [j0, j0 + n) that the window hides from query i: older
  /// than window_start(i) and not kept (docs/windows.md). Causality is left to visible().
  ATTNLAB_INLINE void hide_outside_window(int64_t i, int64_t j0, int64_t n, T* s) const {
    if (window == 0) return;
    const int64_t to = std::min(j0 + n, window_start(i));
    for (int64_t j = std::max(j0, keep); j < to; ++j) s[j - j0] = neg_inf<T>();
  }
  /// The first key tile (tiles start at multiples of `cap`) at or after j0 that queries from i0 on
  /// may see: every tile holding a kept key, then the tiles from the one holding window_start(i0).
  /// Without a window, j0 itself: the causal walk.
  int64_t walked_key_tile(int64_t j0, int64_t cap, int64_t i0) const {
    if (window == 0 || j0 < keep) return j0;
    return std::max(j0, std::max<int64_t>(0, window_start(i0)) / cap * cap);
  }
  /// One past the last query that sees a key of [j0, j0 + n): tq by causality, and with a window,
  /// for a tile without a kept key, the query at position j0 + n - 1 + W - 1.
  int64_t query_end(int64_t j0, int64_t n) const {
    if (window == 0 || j0 < keep) return tq;
    return std::clamp<int64_t>(j0 + n - 1 + window - (tk - tq), 0, tq);
  }
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
  const bool hides = window_hides_keys(s.window, s.keep_first, s.k_len);  // else the global layer's walk, bit for bit
  hs.window = hides ? s.window : 0;
  hs.keep = hides ? s.keep_first : 0;
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
