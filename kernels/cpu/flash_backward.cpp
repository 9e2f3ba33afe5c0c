// Tiled flash-attention backward on CPU (derivation in docs/kernels.md). Probabilities are recomputed
// from lse tile by tile, so no T x T buffer exists:
//   a_ij = exp(s_ij + r_j - lse_i),  D_i = dO_i . O_i,  dP_ij = dO_i . v_j,  dS_ij = a_ij (dP_ij - D_i)
//   dV_j = sum_i a_ij dO_i,  dQ_i = scale sum_j dS_ij k_j,  dK_j = scale sum_i dS_ij q_i,
//   d r_j = sum_i dS_ij,  d b_h = -sum_i p_i D_i with p_i = exp(b_h - lse_i).
// Parallel over (b, h): each task owns its dQ rows and key gradients, so no atomics are needed and
// the result does not depend on the thread count.
#include <cmath>
#include <vector>

#include "attention_head.h"
#include "cpu_common.h"

namespace attnlab::kernels {
namespace cpu {
namespace {

/// Gradient pointers of one (b, h) plus the forward's lse-side inputs.
template <class T>
struct HeadGrads {
  const T* d_o;     ///< [Tq, d]
  const T* d_lse;   ///< [Tq] or null
  T* d_q;           ///< [Tq, d]
  T* d_k;           ///< [Tk, d]
  T* d_v;           ///< [Tk, d]
  T* d_bias;        ///< [Tk] or null
};

template <class T>
HeadGrads<T> head_grads(const AttentionShape& s, const BackwardArgs& a, const void* d_lse, int64_t bh) {
  const int64_t d = s.head_dim;
  HeadGrads<T> g;
  g.d_o = static_cast<const T*>(a.d_o) + bh * s.q_len * d;
  g.d_lse = d_lse ? static_cast<const T*>(d_lse) + bh * s.q_len : nullptr;
  g.d_q = static_cast<T*>(a.d_q) + bh * s.q_len * d;
  g.d_k = static_cast<T*>(a.d_k) + bh * s.k_len * d;
  g.d_v = static_cast<T*>(a.d_v) + bh * s.k_len * d;
  g.d_bias = a.d_routing_bias ? static_cast<T*>(a.d_routing_bias) + bh * s.k_len : nullptr;
  return g;
}

/// Per-task buffers: one key tile (K^T with its additive terms, V^T), its gradient accumulators,
/// and the per-query D_i of the current head.
template <class T>
struct BackwardScratch {
  KeyTile<T> tile;
  std::vector<T> vT, dk, dv, dbias, p, dp, q_scaled, delta;

  BackwardScratch(int64_t cap, int64_t d, int64_t tq)
      : tile(cap, d), vT(static_cast<size_t>(cap * d)), dk(static_cast<size_t>(cap * d)),
        dv(static_cast<size_t>(cap * d)), dbias(cap), p(cap), dp(cap), q_scaled(d), delta(tq) {}
};

/// D_i = dO_i . O_i - dlse_i (the upstream gradient of lse itself shifts D, docs/kernels.md).
template <class T>
void compute_delta(const HeadSlice<T>& hs, const HeadGrads<T>& g, T* delta) {
  for (int64_t i = 0; i < hs.tq; ++i) {
    delta[i] = dot(hs.d, g.d_o + i * hs.d, hs.o + i * hs.d) - (g.d_lse ? g.d_lse[i] : T(0));
  }
}

/// Query row i against the first n keys of the loaded tile: accumulates dV, dK, d r of the tile and
/// dQ_i in place.
template <class T>
void backward_row(const HeadSlice<T>& hs, const HeadGrads<T>& g, int64_t i, int64_t n, BackwardScratch<T>& sc) {
  const int64_t d = hs.d, cap = sc.tile.cap, j0 = sc.tile.j0;
  const T* q = hs.q + i * d;
  const T* d_o = g.d_o + i * d;
  for (int64_t x = 0; x < d; ++x) sc.q_scaled[x] = q[x] * hs.scale;
  T* p = sc.p.data();
  T* dp = sc.dp.data();
  row_times_tile(sc.q_scaled.data(), sc.tile.kT.data(), d, cap, n, sc.tile.add.data(), p);
  const T lse = hs.lse[i];
  for (int64_t j = 0; j < n; ++j) p[j] = std::exp(p[j] - lse);  // a_ij; masked keys give 0
  row_times_tile(d_o, sc.vT.data(), d, cap, n, static_cast<const T*>(nullptr), dp);
  const T delta = sc.delta[i];
  T* d_q = g.d_q + i * d;
  for (int64_t j = 0; j < n; ++j) {
    if (p[j] == T(0)) continue;
    const T ds = p[j] * (dp[j] - delta);
    axpy(d, p[j], d_o, sc.dv.data() + j * d);
    axpy(d, ds * hs.scale, q, sc.dk.data() + j * d);
    axpy(d, ds * hs.scale, hs.k + (j0 + j) * d, d_q);
    sc.dbias[j] += ds;
  }
}

/// Keys [j0, j0 + n): every query that sees one of them, then the tile's gradients are written.
template <class T>
void backward_key_tile(const HeadSlice<T>& hs, const HeadGrads<T>& g, int64_t j0, int64_t n,
                       BackwardScratch<T>& sc) {
  const int64_t d = hs.d;
  sc.tile.load(hs, j0, n);
  transpose_tile(hs.v + j0 * d, n, d, sc.tile.cap, sc.vT.data());
  std::fill(sc.dk.begin(), sc.dk.begin() + n * d, T(0));
  std::fill(sc.dv.begin(), sc.dv.begin() + n * d, T(0));
  std::fill(sc.dbias.begin(), sc.dbias.begin() + n, T(0));
  for (int64_t i = std::max<int64_t>(0, j0 - (hs.tk - hs.tq)); i < hs.tq; ++i) {
    // lse = -inf: a row with no key and no sink has no probability mass and no gradient.
    if (hs.lse[i] == neg_inf<T>()) continue;
    backward_row(hs, g, i, hs.visible(i, j0, n), sc);
  }
  std::copy(sc.dk.begin(), sc.dk.begin() + n * d, g.d_k + j0 * d);
  std::copy(sc.dv.begin(), sc.dv.begin() + n * d, g.d_v + j0 * d);
  if (g.d_bias) std::copy(sc.dbias.begin(), sc.dbias.begin() + n, g.d_bias + j0);
}

/// -sum_i p_i D_i of one head, p_i = exp(b_h - lse_i) the phantom mass (0 for an empty row).
template <class T>
T sink_gradient(const HeadSlice<T>& hs, const T* delta) {
  T sum = 0;
  for (int64_t i = 0; i < hs.tq; ++i) {
    if (hs.lse[i] != neg_inf<T>()) sum -= std::exp(hs.sink - hs.lse[i]) * delta[i];
  }
  return sum;
}

template <class T>
void backward(const AttentionShape& s, const BackwardArgs& a, const void* d_lse, const ParallelFor& parallel,
              const CpuTiling& t) {
  const int64_t d = s.head_dim;
  std::vector<T> sink_partial(static_cast<size_t>(s.batch * s.heads), T(0));
  run_parallel(parallel, s.batch * s.heads, 1, [&](int64_t begin, int64_t end) {
    BackwardScratch<T> sc(t.k_tile, d, s.q_len);
    for (int64_t bh = begin; bh < end; ++bh) {
      const auto hs = head_slice<T>(s, a.fwd, bh / s.heads, bh % s.heads);
      const auto g = head_grads<T>(s, a, d_lse, bh);
      compute_delta(hs, g, sc.delta.data());
      std::fill(g.d_q, g.d_q + s.q_len * d, T(0));
      for (int64_t j0 = 0; j0 < s.k_len; j0 += t.k_tile) {
        backward_key_tile(hs, g, j0, std::min(t.k_tile, s.k_len - j0), sc);
      }
      if (s.has_sink) sink_partial[bh] = sink_gradient(hs, sc.delta.data());
    }
  });
  if (!a.d_sink_logit) return;
  T* d_sink = static_cast<T*>(a.d_sink_logit);
  for (int64_t h = 0; h < s.heads; ++h) {
    T sum = 0;
    for (int64_t b = 0; b < s.batch; ++b) sum += sink_partial[b * s.heads + h];
    d_sink[h] = sum;
  }
}

}  // namespace
}  // namespace cpu

void flash_attention_backward_cpu(const AttentionShape& shape, const BackwardArgs& args, const void* d_lse,
                                  const ParallelFor& parallel, const CpuTiling& tiling) {
  const char* who = "flash_attention_backward_cpu";
  cpu::check_forward_args(shape, args.fwd, tiling, who);
  cpu::require(args.d_o && args.d_q && args.d_k && args.d_v, who, "d_o, d_q, d_k and d_v are required");
  cpu::require(!args.d_routing_bias || shape.has_routing_bias, who, "d_routing_bias without a routing bias");
  cpu::require(!args.d_sink_logit || shape.has_sink, who, "d_sink_logit without a sink term");
  cpu::dispatch_float(shape.dtype, who, [&](auto zero) {
    cpu::backward<decltype(zero)>(shape, args, d_lse, parallel, tiling);
  });
}

}  // namespace attnlab::kernels
