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
/// one query block's P, dP / dS and their transposes, and the per-query D_i of the current head.
template <class T>
struct BackwardScratch {
  KeyTile<T> tile;
  int64_t q_cap;
  std::vector<T> vT, dk, dv, dbias, q_scaled, p, ds, pT, dsT, delta;

  BackwardScratch(int64_t q_cap_, int64_t k_cap, int64_t d, int64_t tq)
      : tile(k_cap, d), q_cap(q_cap_), vT(static_cast<size_t>(d * tile.ld), T(0)), dk(static_cast<size_t>(k_cap * d)),
        dv(static_cast<size_t>(k_cap * d)), dbias(static_cast<size_t>(tile.ld)), q_scaled(static_cast<size_t>(q_cap * d)),
        p(static_cast<size_t>(q_cap * tile.ld)), ds(static_cast<size_t>(q_cap * tile.ld)),
        pT(static_cast<size_t>(tile.ld * q_cap)), dsT(static_cast<size_t>(tile.ld * q_cap)), delta(tq) {}
};

/// D_i = dO_i . O_i - dlse_i (the upstream gradient of lse itself shifts D, docs/kernels.md).
template <class T>
ATTNLAB_INLINE void compute_delta(const HeadSlice<T>& hs, const HeadGrads<T>& g, T* delta) {
  for (int64_t i = 0; i < hs.tq; ++i) {
    delta[i] = dot(hs.d, g.d_o + i * hs.d, hs.o + i * hs.d) - (g.d_lse ? g.d_lse[i] : T(0));
  }
}

/// P = exp(S - lse) for query rows [i0, i0 + rows) against the loaded tile; 0 for keys a row cannot
/// see and for rows without mass (lse = -inf: no key and no sink, so no gradient either).
template <class T, int V>
ATTNLAB_INLINE void recompute_probabilities(const HeadSlice<T>& hs, int64_t i0, int64_t rows, BackwardScratch<T>& sc) {
  const int64_t d = hs.d, ld = sc.tile.ld, nk = sc.tile.n;
  for (int64_t x = 0; x < rows * d; ++x) sc.q_scaled[x] = hs.q[i0 * d + x] * hs.scale;
  for (int64_t r = 0; r < rows; ++r) std::copy(sc.tile.add.begin(), sc.tile.add.end(), sc.p.begin() + r * ld);
  gemm_acc<T, V>(rows, ld, d, sc.q_scaled.data(), d, sc.tile.kT.data(), ld, sc.p.data(), ld);
  for (int64_t r = 0; r < rows; ++r) {
    T* p = sc.p.data() + r * ld;
    const T lse = hs.lse[i0 + r];
    const int64_t n = lse == neg_inf<T>() ? 0 : std::max<int64_t>(0, hs.visible(i0 + r, sc.tile.j0, nk));
    hs.hide_outside_window(i0 + r, sc.tile.j0, n, p);  // exp(-inf) = 0: no probability, no gradient
    exp_shifted(n, lse, p);
    std::fill(p + n, p + nk, T(0));
  }
}

/// dS = P o (dP - D), dP = dO V^T; also accumulates d r_j = sum_i dS_ij.
template <class T, int V>
ATTNLAB_INLINE void score_gradients(const HeadGrads<T>& g, int64_t i0, int64_t rows, int64_t d, BackwardScratch<T>& sc) {
  const int64_t ld = sc.tile.ld, nk = sc.tile.n;
  std::fill(sc.ds.begin(), sc.ds.begin() + rows * ld, T(0));
  gemm_acc<T, V>(rows, ld, d, g.d_o + i0 * d, d, sc.vT.data(), ld, sc.ds.data(), ld);
  for (int64_t r = 0; r < rows; ++r) {
    const T* p = sc.p.data() + r * ld;
    T* ds = sc.ds.data() + r * ld;
    const T delta = sc.delta[i0 + r];
    for (int64_t j = 0; j < nk; ++j) ds[j] = p[j] * (ds[j] - delta);
    for (int64_t j = 0; j < nk; ++j) sc.dbias[j] += ds[j];
  }
}

/// Query rows [i0, i0 + rows) against the loaded key tile: dV += P^T dO, dK += dS^T (scale Q),
/// dQ += scale dS K (dQ rows accumulate in place across key tiles).
template <class T, int V>
ATTNLAB_INLINE void backward_block(const HeadSlice<T>& hs, const HeadGrads<T>& g, int64_t i0, int64_t rows,
                                   BackwardScratch<T>& sc) {
  const int64_t d = hs.d, ld = sc.tile.ld, nk = sc.tile.n, qc = sc.q_cap;
  recompute_probabilities<T, V>(hs, i0, rows, sc);
  score_gradients<T, V>(g, i0, rows, d, sc);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < nk; ++j) {
      sc.pT[j * qc + r] = sc.p[r * ld + j];
      sc.dsT[j * qc + r] = sc.ds[r * ld + j];
    }
  }
  gemm_acc<T, V>(nk, d, rows, sc.pT.data(), qc, g.d_o + i0 * d, d, sc.dv.data(), d);
  gemm_acc<T, V>(nk, d, rows, sc.dsT.data(), qc, sc.q_scaled.data(), d, sc.dk.data(), d);
  for (int64_t x = 0; x < rows * ld; ++x) sc.ds[x] *= hs.scale;
  gemm_acc<T, V>(rows, d, nk, sc.ds.data(), ld, hs.k + sc.tile.j0 * d, d, g.d_q + i0 * d, d);
}

/// Keys [j0, j0 + n): every query block that sees one of them (from the causal start to
/// query_end()), then the tile's gradients are written.
template <class T, int V>
ATTNLAB_INLINE void backward_key_tile(const HeadSlice<T>& hs, const HeadGrads<T>& g, int64_t j0, int64_t n,
                                      BackwardScratch<T>& sc) {
  const int64_t d = hs.d;
  sc.tile.load(hs, j0, n);
  transpose_tile(hs.v + j0 * d, n, d, sc.tile.ld, sc.vT.data());
  std::fill(sc.dk.begin(), sc.dk.begin() + n * d, T(0));
  std::fill(sc.dv.begin(), sc.dv.begin() + n * d, T(0));
  std::fill(sc.dbias.begin(), sc.dbias.begin() + n, T(0));
  const int64_t i_end = hs.query_end(j0, n);
  for (int64_t i0 = std::max<int64_t>(0, j0 - (hs.tk - hs.tq)); i0 < i_end; i0 += sc.q_cap) {
    backward_block<T, V>(hs, g, i0, std::min(sc.q_cap, i_end - i0), sc);
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

/// Heads [begin, end) of the flattened (b, h), compiled once per ISA (isa.h; V its line in bytes).
template <class T, int V>
ATTNLAB_INLINE void backward_heads(const AttentionShape& s, const BackwardArgs& a, const void* d_lse, const CpuTiling& t,
                                   int64_t begin, int64_t end, T* sink_partial) {
  const int64_t d = s.head_dim;
  BackwardScratch<T> sc(t.q_tile, t.k_tile, d, s.q_len);
  for (int64_t bh = begin; bh < end; ++bh) {
    const auto hs = head_slice<T>(s, a.fwd, bh / s.heads, bh % s.heads);
    const auto g = head_grads<T>(s, a, d_lse, bh);
    compute_delta(hs, g, sc.delta.data());
    std::fill(g.d_q, g.d_q + s.q_len * d, T(0));
    for (int64_t j0 = 0; j0 < s.k_len; j0 += t.k_tile) backward_key_tile<T, V>(hs, g, j0, std::min(t.k_tile, s.k_len - j0), sc);
    if (s.has_sink) sink_partial[bh] = sink_gradient(hs, sc.delta.data());
  }
}

ATTNLAB_DISPATCH_ISA(backward_heads,
                     (const AttentionShape& s, const BackwardArgs& a, const void* d_lse, const CpuTiling& t,
                      int64_t begin, int64_t end, T* sink_partial),
                     (s, a, d_lse, t, begin, end, sink_partial))

template <class T>
void backward(const AttentionShape& s, const BackwardArgs& a, const void* d_lse, const ParallelFor& parallel,
              const CpuTiling& t) {
  std::vector<T> sink_partial(static_cast<size_t>(s.batch * s.heads), T(0));
  run_parallel(parallel, s.batch * s.heads, 1, [&](int64_t begin, int64_t end) {
    backward_heads_isa<T>(s, a, d_lse, t, begin, end, sink_partial.data());
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
