// Fused value gate on CPU (SPEC section 1): per key read v_j of head h,
//   norm z_j = beta (||v_j|| / sqrt(d) - tau_h),  projection z_j = w_h . v_j + c_h,
//   g_j = sigmoid(z_j), gated read g_j v_j, routing bias log g_j = logsigmoid(z_j).
// Backward: dz_j = g_j (1 - g_j) (dU_j . v_j) + (1 - g_j) dR_j; dv_j = g_j dU_j + dz_j dz_j/dv_j;
// d tau_h = -beta sum dz_j, d w_h = sum dz_j v_j, d c_h = sum dz_j.
#include <cmath>
#include <vector>

#include "cpu_common.h"
#include "tile_math.h"

namespace attnlab::kernels {
namespace cpu {
namespace {

/// sigmoid(z) without overflow for either sign.
template <class T>
T sigmoid(T z) {
  if (z >= 0) return T(1) / (T(1) + std::exp(-z));
  const T e = std::exp(z);
  return e / (T(1) + e);
}

/// log sigmoid(z) = min(z, 0) - log1p(exp(-|z|)): finite for any finite z.
template <class T>
T log_sigmoid(T z) {
  return std::min(z, T(0)) - std::log1p(std::exp(-std::abs(z)));
}

/// The gate of one head's keys: parameters resolved, z of one read.
template <class T>
struct HeadGate {
  ValueGateKind kind;
  int64_t d;
  T beta, tau, c;
  const T* w;  ///< [d], projection gate

  T logit(const T* v, T* norm_out = nullptr) const {
    if (kind == ValueGateKind::projection) return dot(d, w, v) + c;
    const T norm = std::sqrt(dot(d, v, v));
    if (norm_out) *norm_out = norm;
    return beta * (norm / std::sqrt(T(d)) - tau);
  }
};

template <class T>
HeadGate<T> head_gate(const ValueGateShape& s, const ValueGateForwardArgs& a, int64_t h) {
  HeadGate<T> g{s.kind, s.head_dim, static_cast<T>(s.beta), T(0), T(0), nullptr};
  if (s.kind == ValueGateKind::norm) {
    g.tau = static_cast<const T*>(a.tau)[h];
  } else {
    g.w = static_cast<const T*>(a.w) + h * s.head_dim;
    g.c = static_cast<const T*>(a.c)[h];
  }
  return g;
}

template <class T>
void forward(const ValueGateShape& s, const ValueGateForwardArgs& a, const ParallelFor& parallel) {
  const int64_t d = s.head_dim, rows = s.batch * s.heads * s.len;
  run_parallel(parallel, rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const auto gate = head_gate<T>(s, a, (row / s.len) % s.heads);
      const T* v = static_cast<const T*>(a.v) + row * d;
      const T z = gate.logit(v);
      if (a.gated_v) {
        const T g = sigmoid(z);
        T* out = static_cast<T*>(a.gated_v) + row * d;
        for (int64_t x = 0; x < d; ++x) out[x] = g * v[x];
      }
      if (a.log_gate) static_cast<T*>(a.log_gate)[row] = log_sigmoid(z);
    }
  });
}

/// Per-(b, h) partial sums of the parameter gradients: [tau or c, w_0 .. w_{d-1}].
template <class T>
void backward_row(const ValueGateShape& s, const ValueGateBackwardArgs& a, const HeadGate<T>& gate, int64_t row,
                  T* partial) {
  const int64_t d = s.head_dim;
  const T* v = static_cast<const T*>(a.fwd.v) + row * d;
  const T* du = a.d_gated_v ? static_cast<const T*>(a.d_gated_v) + row * d : nullptr;
  T norm = 0;
  const T z = gate.logit(v, &norm);
  const T g = sigmoid(z), one_minus_g = sigmoid(-z);
  T dz = 0;
  if (du) dz += g * one_minus_g * dot(d, du, v);
  if (a.d_log_gate) dz += one_minus_g * static_cast<const T*>(a.d_log_gate)[row];

  T* dv = static_cast<T*>(a.d_v) + row * d;
  for (int64_t x = 0; x < d; ++x) dv[x] = du ? g * du[x] : T(0);
  if (gate.kind == ValueGateKind::projection) {
    axpy(d, dz, gate.w, dv);
    partial[0] += dz;
    axpy(d, dz, v, partial + 1);
  } else {
    // d||v|| / dv = v / ||v||; at v = 0 take the zero subgradient.
    if (norm > T(0)) axpy(d, dz * gate.beta / (norm * std::sqrt(T(d))), v, dv);
    partial[0] -= gate.beta * dz;
  }
}

template <class T>
void backward(const ValueGateShape& s, const ValueGateBackwardArgs& a, const ParallelFor& parallel) {
  const int64_t d = s.head_dim, stride = d + 1;
  std::vector<T> partial(static_cast<size_t>(s.batch * s.heads * stride), T(0));
  run_parallel(parallel, s.batch * s.heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const auto gate = head_gate<T>(s, a.fwd, bh % s.heads);
      for (int64_t t = 0; t < s.len; ++t) backward_row(s, a, gate, bh * s.len + t, partial.data() + bh * stride);
    }
  });
  // Fixed-order reduction over the batch: the result does not depend on the thread count.
  for (int64_t h = 0; h < s.heads; ++h) {
    std::vector<T> sum(static_cast<size_t>(stride), T(0));
    for (int64_t b = 0; b < s.batch; ++b) axpy(stride, T(1), partial.data() + (b * s.heads + h) * stride, sum.data());
    if (s.kind == ValueGateKind::norm && a.d_tau) static_cast<T*>(a.d_tau)[h] = sum[0];
    if (s.kind == ValueGateKind::projection && a.d_c) static_cast<T*>(a.d_c)[h] = sum[0];
    if (s.kind == ValueGateKind::projection && a.d_w) std::copy(sum.begin() + 1, sum.end(), static_cast<T*>(a.d_w) + h * d);
  }
}

void check(const ValueGateShape& s, const ValueGateForwardArgs& a, const char* who) {
  require(s.batch >= 0 && s.heads >= 0 && s.len >= 0 && s.head_dim > 0, who, "negative size");
  require(a.v != nullptr, who, "v is required");
  if (s.kind == ValueGateKind::norm) require(a.tau != nullptr, who, "the norm gate needs tau");
  if (s.kind == ValueGateKind::projection) require(a.w && a.c, who, "the projection gate needs w and c");
}

}  // namespace
}  // namespace cpu

void value_gate_forward_cpu(const ValueGateShape& shape, const ValueGateForwardArgs& args,
                            const ParallelFor& parallel) {
  cpu::check(shape, args, "value_gate_forward_cpu");
  cpu::dispatch_float(shape.dtype, "value_gate_forward_cpu",
                      [&](auto zero) { cpu::forward<decltype(zero)>(shape, args, parallel); });
}

void value_gate_backward_cpu(const ValueGateShape& shape, const ValueGateBackwardArgs& args,
                             const ParallelFor& parallel) {
  const char* who = "value_gate_backward_cpu";
  cpu::check(shape, args.fwd, who);
  cpu::require(args.d_v != nullptr, who, "d_v is required");
  cpu::dispatch_float(shape.dtype, who, [&](auto zero) { cpu::backward<decltype(zero)>(shape, args, parallel); });
}

}  // namespace attnlab::kernels
