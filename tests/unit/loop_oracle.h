// Plain loop-over-indices implementation of SPEC section 1 in double precision: the independent
// oracle the composed-op reference is checked against. No LibTorch maths inside.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attnlab/arm.h"

namespace attnlab::testing {

struct LoopInputs {
  int B, H, T, d;
  std::vector<double> q, k, v;  // [B][H][T][d]
  std::vector<double> b;        // [H] sink logit (learned arms)
  std::vector<double> tau;      // [H]
  std::vector<double> w;        // [H][d]
  std::vector<double> c;        // [H]
  int window = 0;               // W of a local layer; 0: none (docs/windows.md)
  int keep_first = 0;           // n: positions j < n every query sees (with a window)
  /// Query i sees key j (j <= i): every key, or under a window i - j < W or j < n.
  bool sees(int i, int j) const { return window == 0 || i - j < window || j < keep_first; }
};

struct LoopOutputs {
  std::vector<double> o;        // [B][H][T][d]
  std::vector<double> lse;      // [B][H][T]
  std::vector<double> phantom;  // [B][H][T]
};

inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

inline LoopOutputs loop_attention(const ArmSpec& arm, const LoopInputs& in) {
  const int B = in.B, H = in.H, T = in.T, d = in.d;
  auto at = [&](int b, int h, int t) { return ((b * H + h) * T + t) * d; };
  LoopOutputs out;
  out.o.assign(static_cast<size_t>(B) * H * T * d, 0.0);
  out.lse.assign(static_cast<size_t>(B) * H * T, 0.0);
  out.phantom.assign(static_cast<size_t>(B) * H * T, 0.0);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      std::vector<double> g(T, 1.0);
      for (int j = 0; j < T; ++j) {
        if (arm.gate == GateKind::norm) {
          double n2 = 0;
          for (int x = 0; x < d; ++x) n2 += in.v[at(b, h, j) + x] * in.v[at(b, h, j) + x];
          g[j] = sigmoid(8.0 * (std::sqrt(n2) / std::sqrt(double(d)) - in.tau[h]));
        } else if (arm.gate == GateKind::projection) {
          double z = in.c[h];
          for (int x = 0; x < d; ++x) z += in.w[h * d + x] * in.v[at(b, h, j) + x];
          g[j] = sigmoid(z);
        }
      }
      const bool has_sink = arm.sink != SinkKind::none;
      const double sink = arm.sink == SinkKind::learned ? in.b[h] : 0.0;
      for (int i = 0; i < T; ++i) {
        std::vector<double> logit(i + 1);
        double m = has_sink ? sink : -std::numeric_limits<double>::infinity();
        for (int j = 0; j <= i; ++j) {
          logit[j] = -std::numeric_limits<double>::infinity();  // a key outside the window: exp(-inf) = 0
          if (!in.sees(i, j)) continue;
          double s = 0;
          for (int x = 0; x < d; ++x) s += in.q[at(b, h, i) + x] * in.k[at(b, h, j) + x];
          logit[j] = s / std::sqrt(double(d)) + (arm.slot == GateSlot::routing ? std::log(g[j]) : 0.0);
          m = std::max(m, logit[j]);
        }
        double denom = has_sink ? std::exp(sink - m) : 0.0;
        for (int j = 0; j <= i; ++j) denom += std::exp(logit[j] - m);
        const size_t row = (b * H + h) * T + i;
        out.lse[row] = m + std::log(denom);
        out.phantom[row] = has_sink ? std::exp(sink - m) / denom : 0.0;
        for (int j = 0; j <= i; ++j) {
          const double a = std::exp(logit[j] - m) / denom;
          const double gate = arm.slot == GateSlot::value ? g[j] : 1.0;
          for (int x = 0; x < d; ++x) out.o[at(b, h, i) + x] += a * gate * in.v[at(b, h, j) + x];
        }
      }
    }
  }
  return out;
}

/// The output gate (docs/arms.md, "The output gate") after loop_attention's o [B][H][T][d]:
/// x [B][T][D] with D = H d, W_g [D][G], c_g [G], G = H (headwise) or H d (elementwise, column
/// h d + c gates channel c of head h). Returns the gated o in the same layout.
inline std::vector<double> loop_output_gate(const ArmSpec& arm, const std::vector<double>& o, int B, int H, int T,
                                            int d, const std::vector<double>& x, const std::vector<double>& w,
                                            const std::vector<double>& c) {
  const int D = H * d, G = arm.out_gate == OutputGate::headwise ? H : D;
  std::vector<double> out = o;
  if (arm.out_gate == OutputGate::none) return out;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int e = 0; e < d; ++e) {
          const int col = G == H ? h : h * d + e;
          double z = c[col];
          for (int i = 0; i < D; ++i) z += x[(b * T + t) * D + i] * w[i * G + col];
          out[((b * H + h) * T + t) * d + e] *= sigmoid(z);
        }
  return out;
}

}  // namespace attnlab::testing
