// Double-precision reference of SPEC section 1's attention and value gate, written from the formulas
// with explicit probabilities (no tiling), for the host emulation check of the CUDA kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace emu {

using Vec = std::vector<double>;

struct AttnCase {
  int64_t B = 1, H = 1, Tq = 1, Tk = 1, d = 64;
  bool sink = false, bias = false, mask = false;
  int64_t window = 0, keep_first = 0;  // W (0: none) and n of docs/windows.md
  /// o as the forward stores it (rounded to the kernel's type), for D_i = dO_i . o_i: the backward
  /// reads that o, whose rounding error would otherwise add up over the rows of d_sink. Null: exact.
  double (*o_stored)(double) = nullptr;
  Vec q, k, v, sink_logit, routing_bias, d_o, d_lse;  // [B,H,T,d], [H], [B,H,Tk], [B,H,Tq,d], [B,H,Tq]
  std::vector<char> key_mask;                         // [B,Tk]
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(d)); }
  /// docs/windows.md, "The rule": query position p sees key j <= p inside its window or kept.
  bool sees(int64_t b, int64_t i, int64_t j) const {
    const int64_t p = Tk - Tq + i;
    const bool in_window = window == 0 || p - j < window || j < keep_first;
    return j <= p && in_window && (!mask || key_mask[b * Tk + j]);
  }
};

struct AttnResult {
  Vec o, lse, d_q, d_k, d_v, d_sink, d_bias;
};

/// Forward and backward of one case; loss = sum(o * d_o) + sum(lse * d_lse).
inline AttnResult reference_attention(const AttnCase& c) {
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t B = c.B, H = c.H, Tq = c.Tq, Tk = c.Tk, d = c.d;
  AttnResult r;
  r.o.assign(B * H * Tq * d, 0.0);
  r.lse.assign(B * H * Tq, -inf);
  r.d_q.assign(B * H * Tq * d, 0.0);
  r.d_k.assign(B * H * Tk * d, 0.0);
  r.d_v.assign(B * H * Tk * d, 0.0);
  r.d_sink.assign(H, 0.0);
  r.d_bias.assign(B * H * Tk, 0.0);
  std::vector<double> z(Tk), p(Tk), dp(Tk);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      for (int64_t i = 0; i < Tq; ++i) {
        const double* qi = &c.q[(bh * Tq + i) * d];
        double m = c.sink ? c.sink_logit[h] : -inf;
        for (int64_t j = 0; j < Tk; ++j) {
          const bool visible = c.sees(b, i, j);
          double s = 0;
          for (int64_t e = 0; e < d; ++e) s += qi[e] * c.k[(bh * Tk + j) * d + e];
          z[j] = visible ? s * c.scale() + (c.bias ? c.routing_bias[bh * Tk + j] : 0.0) : -inf;
          m = std::max(m, z[j]);
        }
        if (m == -inf) continue;  // no key, no sink: o = 0, lse = -inf, no gradient
        double denom = c.sink ? std::exp(c.sink_logit[h] - m) : 0.0;
        for (int64_t j = 0; j < Tk; ++j) denom += std::exp(z[j] - m);
        const double lse = m + std::log(denom);
        r.lse[bh * Tq + i] = lse;
        double* oi = &r.o[(bh * Tq + i) * d];
        for (int64_t j = 0; j < Tk; ++j) {
          p[j] = std::exp(z[j] - lse);
          for (int64_t e = 0; e < d; ++e) oi[e] += p[j] * c.v[(bh * Tk + j) * d + e];
        }
        // Backward: dz_ij = p_ij (dp_ij - D_i), D_i = dO_i . o_i - dlse_i; sink: dz = p_i (0 - D_i).
        const double* doi = &c.d_o[(bh * Tq + i) * d];
        double D = -c.d_lse[bh * Tq + i];
        for (int64_t e = 0; e < d; ++e) D += doi[e] * (c.o_stored ? c.o_stored(oi[e]) : oi[e]);
        if (c.sink) r.d_sink[h] -= std::exp(c.sink_logit[h] - lse) * D;
        for (int64_t j = 0; j < Tk; ++j) {
          if (p[j] == 0.0) continue;
          double dpj = 0;
          for (int64_t e = 0; e < d; ++e) dpj += doi[e] * c.v[(bh * Tk + j) * d + e];
          const double dz = p[j] * (dpj - D);
          r.d_bias[bh * Tk + j] += dz;
          for (int64_t e = 0; e < d; ++e) {
            r.d_v[(bh * Tk + j) * d + e] += p[j] * doi[e];
            r.d_q[(bh * Tq + i) * d + e] += dz * c.scale() * c.k[(bh * Tk + j) * d + e];
            r.d_k[(bh * Tk + j) * d + e] += dz * c.scale() * qi[e];
          }
        }
      }
    }
  return r;
}

struct GateCase {
  int64_t B = 1, H = 1, T = 1, d = 64;
  bool norm = true;
  double beta = 8.0;
  Vec v, tau, w, c, d_u, d_log;  // [B,H,T,d], [H], [H,d], [H], [B,H,T,d], [B,H,T]
};

struct GateResult {
  Vec u, log_g, d_v, d_tau, d_w, d_c;
};

inline GateResult reference_gate(const GateCase& g) {
  const int64_t rows = g.B * g.H * g.T, d = g.d;
  GateResult r;
  r.u.assign(rows * d, 0.0);
  r.log_g.assign(rows, 0.0);
  r.d_v.assign(rows * d, 0.0);
  r.d_tau.assign(g.H, 0.0);
  r.d_w.assign(g.H * d, 0.0);
  r.d_c.assign(g.H, 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t h = row / g.T % g.H;
    const double* v = &g.v[row * d];
    double ss = 0, wv = 0;
    for (int64_t e = 0; e < d; ++e) {
      ss += v[e] * v[e];
      if (!g.norm) wv += g.w[h * d + e] * v[e];
    }
    const double norm = std::sqrt(ss);
    const double z = g.norm ? g.beta * (norm / std::sqrt(double(d)) - g.tau[h]) : wv + g.c[h];
    const double gate = 1.0 / (1.0 + std::exp(-z));
    r.log_g[row] = std::log(gate);
    double du_v = 0;
    for (int64_t e = 0; e < d; ++e) {
      r.u[row * d + e] = gate * v[e];
      du_v += g.d_u[row * d + e] * v[e];
    }
    const double dz = gate * (1 - gate) * du_v + (1 - gate) * g.d_log[row];
    for (int64_t e = 0; e < d; ++e) {
      const double dz_dv =
          g.norm ? (norm > 0 ? g.beta * v[e] / (std::sqrt(double(d)) * norm) : 0.0) : g.w[h * d + e];
      r.d_v[row * d + e] = gate * g.d_u[row * d + e] + dz * dz_dv;
      r.d_w[h * d + e] += dz * v[e];
    }
    r.d_tau[h] -= g.beta * dz;
    r.d_c[h] += dz;
  }
  return r;
}

}  // namespace emu
