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

/// Per-task buffers: a key tile, the query tile scaled, its scores / probabilities, and the running
/// max m and denominator l (both including the sink term) with the unnormalised output rows.
template <class T>
struct ForwardScratch {
  KeyTile<T> tile;
  std::vector<T> q_scaled, s, m, l, acc;

  ForwardScratch(int64_t rows, int64_t d, int64_t k_cap)
      : tile(k_cap, d), q_scaled(static_cast<size_t>(rows * d)), s(static_cast<size_t>(rows * tile.ld)), m(rows),
        l(rows), acc(static_cast<size_t>(rows * d)) {}
};

/// Before any key the sink alone is in the row: m = b_h, l = exp(b_h - m) = 1.
template <class T>
ATTNLAB_INLINE void start_rows(const HeadSlice<T>& hs, int64_t i0, int64_t rows, ForwardScratch<T>& sc) {
  const int64_t d = hs.d;
  std::fill(sc.m.begin(), sc.m.begin() + rows, hs.has_sink ? hs.sink : neg_inf<T>());
  std::fill(sc.l.begin(), sc.l.begin() + rows, hs.has_sink ? T(1) : T(0));
  std::fill(sc.acc.begin(), sc.acc.begin() + rows * d, T(0));
  for (int64_t x = 0; x < rows * d; ++x) sc.q_scaled[x] = hs.q[i0 * d + x] * hs.scale;
}

/// Online-softmax update of tile row r (query i) from its scores over the first `n` visible keys:
/// turns the score row into probabilities relative to the new max (0 beyond n) and rescales the row.
template <class T>
ATTNLAB_INLINE void online_update(const HeadSlice<T>& hs, int64_t r, int64_t n, ForwardScratch<T>& sc) {
  T* s = sc.s.data() + r * sc.tile.ld;
  const int64_t n_tile = sc.tile.n;
  const T m_new = n > 0 ? max_of(n, s, sc.m[r]) : sc.m[r];
  if (n <= 0 || m_new == neg_inf<T>()) {  // nothing visible yet and no sink: the row stays empty
    std::fill(s, s + n_tile, T(0));
    return;
  }
  const T alpha = exp_nonpositive_any(sc.m[r] - m_new);  // 0 while the row was empty
  exp_shifted(n, m_new, s);
  std::fill(s + n, s + n_tile, T(0));
  sc.l[r] = sc.l[r] * alpha + sum_of(n, s);
  if (alpha != T(1)) {
    T* acc = sc.acc.data() + r * hs.d;
    for (int64_t x = 0; x < hs.d; ++x) acc[x] *= alpha;
  }
  sc.m[r] = m_new;
}

/// o_i = acc / l and lse_i = m + log l; a row with no mass (no key, no sink) gives o = 0, lse = -inf.
template <class T>
ATTNLAB_INLINE void finish_row(const HeadSlice<T>& hs, int64_t i, int64_t r, const ForwardScratch<T>& sc) {
  const int64_t d = hs.d;
  T* o = hs.o + i * d;
  const T* acc = sc.acc.data() + r * d;
  if (sc.l[r] > T(0)) {
    const T inv = T(1) / sc.l[r];
    for (int64_t x = 0; x < d; ++x) o[x] = acc[x] * inv;
    hs.lse[i] = sc.m[r] + std::log(sc.l[r]);
  } else {
    std::fill(o, o + d, T(0));
    hs.lse[i] = neg_inf<T>();
  }
}

/// Queries [i0, i1) of one head against every key tile the tile's last query can see (with a
/// window, less the tiles wholly older than the first query's window and past the kept keys):
/// S = add + (scale Q) K^T, online softmax per row, acc += P V.
template <class T, int V>
ATTNLAB_INLINE void forward_query_tile(const HeadSlice<T>& hs, int64_t i0, int64_t i1, ForwardScratch<T>& sc) {
  const int64_t rows = i1 - i0, d = hs.d;
  KeyTile<T>& tile = sc.tile;
  start_rows(hs, i0, rows, sc);
  const int64_t k_end = hs.position(i1 - 1) + 1;
  for (int64_t j0 = hs.walked_key_tile(0, tile.cap, i0); j0 < k_end; j0 = hs.walked_key_tile(j0 + tile.cap, tile.cap, i0)) {
    tile.load(hs, j0, std::min(tile.cap, k_end - j0));
    for (int64_t r = 0; r < rows; ++r) std::copy(tile.add.begin(), tile.add.end(), sc.s.begin() + r * tile.ld);
    gemm_acc<T, V>(rows, tile.ld, d, sc.q_scaled.data(), d, tile.kT.data(), tile.ld, sc.s.data(), tile.ld);
    for (int64_t r = 0; r < rows; ++r) {
      hs.hide_outside_window(i0 + r, j0, tile.n, sc.s.data() + r * tile.ld);
      online_update(hs, r, hs.visible(i0 + r, j0, tile.n), sc);
    }
    gemm_acc<T, V>(rows, d, tile.n, sc.s.data(), tile.ld, hs.v + j0 * d, d, sc.acc.data(), d);
  }
  for (int64_t r = 0; r < rows; ++r) finish_row(hs, i0 + r, r, sc);
}

/// Tasks [begin, end) of (b, h, query tile), compiled once per ISA (isa.h; V its line in bytes).
template <class T, int V>
ATTNLAB_INLINE void forward_tasks(const AttentionShape& s, const ForwardArgs& a, const CpuTiling& t, int64_t begin,
                                  int64_t end) {
  const int64_t q_tiles = (s.q_len + t.q_tile - 1) / t.q_tile;
  ForwardScratch<T> sc(t.q_tile, s.head_dim, t.k_tile);
  for (int64_t task = begin; task < end; ++task) {
    const int64_t bh = task / q_tiles, i0 = (task % q_tiles) * t.q_tile;
    const auto hs = head_slice<T>(s, a, bh / s.heads, bh % s.heads);
    forward_query_tile<T, V>(hs, i0, std::min(i0 + t.q_tile, s.q_len), sc);
  }
}

ATTNLAB_DISPATCH_ISA(forward_tasks,
                     (const AttentionShape& s, const ForwardArgs& a, const CpuTiling& t, int64_t begin, int64_t end),
                     (s, a, t, begin, end))

template <class T>
void forward(const AttentionShape& s, const ForwardArgs& a, const ParallelFor& parallel, const CpuTiling& t) {
  const int64_t q_tiles = (s.q_len + t.q_tile - 1) / t.q_tile;
  run_parallel(parallel, s.batch * s.heads * q_tiles, 1,
               [&](int64_t begin, int64_t end) { forward_tasks_isa<T>(s, a, t, begin, end); });
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
