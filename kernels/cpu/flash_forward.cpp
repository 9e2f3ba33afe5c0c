// Tiled flash-attention forward on CPU (docs/kernels.md): per query tile, an online softmax over
// key tiles whose running max starts at the sink logit, so the sink takes part in it (SPEC section 1,
// Numerics). Memory beyond the outputs: one key tile and one query tile's accumulators per task.
#include <cmath>
#include <vector>

#include "attention_head.h"
#include "cpu_common.h"

namespace attnlab::kernels {
namespace cpu {
namespace {

/// Accumulators of a query tile: running max m and denominator l (both including the sink term)
/// and the unnormalised output rows.
template <class T>
struct QueryTileState {
  std::vector<T> m, l, acc, q_scaled, s;

  QueryTileState(int64_t rows, int64_t d, int64_t k_cap)
      : m(rows), l(rows), acc(static_cast<size_t>(rows * d)), q_scaled(d), s(k_cap) {}

  // Before any key the sink alone is in the row: m = b_h, l = exp(b_h - m) = 1.
  void reset(const HeadSlice<T>& hs, int64_t rows) {
    std::fill(m.begin(), m.begin() + rows, hs.has_sink ? hs.sink : neg_inf<T>());
    std::fill(l.begin(), l.begin() + rows, hs.has_sink ? T(1) : T(0));
    std::fill(acc.begin(), acc.begin() + rows * hs.d, T(0));
  }
};

/// One online-softmax step of query row i (tile row r) over the first n keys of the tile.
template <class T>
void online_step(const HeadSlice<T>& hs, const KeyTile<T>& tile, int64_t i, int64_t r, int64_t n,
                 QueryTileState<T>& st) {
  const int64_t d = hs.d;
  for (int64_t x = 0; x < d; ++x) st.q_scaled[x] = hs.q[i * d + x] * hs.scale;
  T* s = st.s.data();
  row_times_tile(st.q_scaled.data(), tile.kT.data(), d, tile.cap, n, tile.add.data(), s);
  const T m_new = max_of(n, s, st.m[r]);
  if (m_new == neg_inf<T>()) return;  // nothing visible yet and no sink: the row stays empty
  const T alpha = std::exp(st.m[r] - m_new);  // 0 while the row was empty
  st.l[r] = st.l[r] * alpha + exp_shifted(n, m_new, s);
  T* acc = st.acc.data() + r * d;
  if (alpha != T(1)) scale_in_place(d, alpha, acc);
  for (int64_t j = 0; j < n; ++j) {
    if (s[j] != T(0)) axpy(d, s[j], hs.v + (tile.j0 + j) * d, acc);
  }
  st.m[r] = m_new;
}

/// o_i = acc / l and lse_i = m + log l; a row with no mass (no key, no sink) gives o = 0, lse = -inf.
template <class T>
void finish_row(const HeadSlice<T>& hs, int64_t i, int64_t r, const QueryTileState<T>& st) {
  const int64_t d = hs.d;
  T* o = hs.o + i * d;
  const T* acc = st.acc.data() + r * d;
  if (st.l[r] > T(0)) {
    const T inv = T(1) / st.l[r];
    for (int64_t x = 0; x < d; ++x) o[x] = acc[x] * inv;
    hs.lse[i] = st.m[r] + std::log(st.l[r]);
  } else {
    for (int64_t x = 0; x < d; ++x) o[x] = T(0);
    hs.lse[i] = neg_inf<T>();
  }
}

/// Queries [i0, i1) of one head against every key tile the tile's last query can see.
template <class T>
void forward_query_tile(const HeadSlice<T>& hs, int64_t i0, int64_t i1, KeyTile<T>& tile,
                        QueryTileState<T>& st) {
  st.reset(hs, i1 - i0);
  const int64_t k_end = hs.position(i1 - 1) + 1;
  for (int64_t j0 = 0; j0 < k_end; j0 += tile.cap) {
    tile.load(hs, j0, std::min(tile.cap, k_end - j0));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = hs.visible(i, j0, tile.n);
      if (n > 0) online_step(hs, tile, i, i - i0, n, st);
    }
  }
  for (int64_t i = i0; i < i1; ++i) finish_row(hs, i, i - i0, st);
}

template <class T>
void forward(const AttentionShape& s, const ForwardArgs& a, const ParallelFor& parallel, const CpuTiling& t) {
  const int64_t q_tiles = (s.q_len + t.q_tile - 1) / t.q_tile;
  run_parallel(parallel, s.batch * s.heads * q_tiles, 1, [&](int64_t begin, int64_t end) {
    KeyTile<T> tile(t.k_tile, s.head_dim);
    QueryTileState<T> st(t.q_tile, s.head_dim, t.k_tile);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / q_tiles, i0 = (task % q_tiles) * t.q_tile;
      const auto hs = head_slice<T>(s, a, bh / s.heads, bh % s.heads);
      forward_query_tile(hs, i0, std::min(i0 + t.q_tile, s.q_len), tile, st);
    }
  });
}

}  // namespace
}  // namespace cpu

void flash_attention_forward_cpu(const AttentionShape& shape, const ForwardArgs& args,
                                 const ParallelFor& parallel, const CpuTiling& tiling) {
  cpu::check_forward_args(shape, args, tiling, "flash_attention_forward_cpu");
  cpu::dispatch_float(shape.dtype, "flash_attention_forward_cpu", [&](auto zero) {
    cpu::forward<decltype(zero)>(shape, args, parallel, tiling);
  });
}

}  // namespace attnlab::kernels
