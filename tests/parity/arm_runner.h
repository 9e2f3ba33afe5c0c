// One arm's attention layer, forward and backward, on any backend, device and dtype: the piece the
// CPU arm parity suite and the GPU suite share.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "attnlab/arm_attention.h"
#include "extra_arm.h"  // before any suite enumerates the registry
#include "parity_helpers.h"

namespace attnlab::parity {

/// Inputs of one arm call: q, k, v [B, H, T, d] and every arm parameter (each arm uses its own).
struct ArmLeaves {
  at::Tensor q, k, v, b, tau, w, c;
};

/// Seeded float64 CPU values. tau sits near ||v|| / sqrt(d) ~ 1, so norm gates spread over (0, 1).
inline ArmLeaves arm_values(uint64_t seed, int64_t B, int64_t H, int64_t T, int64_t d) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  auto normal = [&](at::IntArrayRef shape, double mean, double stdev) { return at::normal(mean, stdev, shape, gen, opts); };
  return {normal({B, H, T, d}, 0, 1), normal({B, H, T, d}, 0, 1), normal({B, H, T, d}, 0, 1), normal({H}, 0, 1),
          normal({H}, 1.0, 0.2),      normal({H, d}, 0, 0.3),      normal({H}, 0, 1)};
}

/// The input class of keys sharing a large common component: k_j + c, with one c per head (seeded,
/// each element ~ N(0, magnitude^2)), like the mean key direction of trained models. Softmax ignores
/// it (q_i . c is the same for every key of row i), but a half-precision backward that takes D_i from
/// the rounded o and rounds dS before dq = scale dS k leaves sum_j dS_ij's rounding in dq, times |c|
/// (docs/kernels.md, "Precision in bfloat16 / float16"). Every half-precision parity suite runs it.
inline ArmLeaves with_shared_key_component(ArmLeaves l, double magnitude = 8.0, uint64_t seed = 31) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto c = at::normal(0.0, magnitude, {1, l.k.size(1), 1, l.k.size(3)}, gen, at::TensorOptions().dtype(at::kDouble));
  l.k = l.k + c.to(l.k.device());
  return l;
}

/// Fresh leaves on `device`: q, k, v in `dtype`, parameters in its accumulator type (float for half
/// types and float32, double for float64).
inline ArmLeaves as_leaves(const ArmLeaves& src, const at::Device& device, at::ScalarType dtype) {
  const auto acc = dtype == at::kDouble ? at::kDouble : at::kFloat;
  auto leaf = [&](const at::Tensor& t, at::ScalarType type) {
    return t.to(device, type).detach().requires_grad_(true);
  };
  return {leaf(src.q, dtype), leaf(src.k, dtype), leaf(src.v, dtype), leaf(src.b, acc),
          leaf(src.tau, acc), leaf(src.w, acc),   leaf(src.c, acc)};
}

/// Outputs and gradients of loss = sum(o * R) [+ sum(lse * S)], R, S ~ N(0, 1) seeded; all float64 on
/// the CPU. `phantom` is exp(b_h - lse) for arms with a sink term.
struct ArmRun {
  at::Tensor o, lse, phantom, dq, dk, dv, db, dtau, dw, dc;
};

/// The attention step of one arm call: arm_attention on a backend, or a call of one's own.
using ArmAttend = std::function<AttentionResult(const ArmSpec&, const ArmLayerParams&, const at::Tensor& q,
                                                const PreparedKeys&)>;

/// One arm call with `attend` as its attention; `gate_backend` decides the gate (prepare_keys).
inline ArmRun run_arm_with(const ArmSpec& arm, const ArmLeaves& l, AttentionBackend gate_backend,
                           const ArmAttend& attend, bool lse_in_loss = false) {
  for (const auto* t : {&l.q, &l.k, &l.v, &l.b, &l.tau, &l.w, &l.c}) {
    if (t->grad().defined()) t->mutable_grad().reset();
  }
  ArmLayerParams params;
  if (arm.sink == SinkKind::learned) params.sink_logit = l.b;
  if (arm.gate == GateKind::norm) params.gate_tau = l.tau;
  if (arm.gate == GateKind::projection) params.gate_w = l.w, params.gate_c = l.c;
  const auto keys = prepare_keys(arm, params, l.k, l.v, false, gate_backend);
  const auto out = attend(arm, params, l.q, keys);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  auto loss = (out.o * at::normal(0.0, 1.0, out.o.sizes(), gen, f64).to(out.o.options())).sum();
  if (lse_in_loss) loss = loss + (out.lse * at::normal(0.0, 1.0, out.lse.sizes(), gen, f64).to(out.lse.options())).sum();
  loss.backward();
  auto host = [](const at::Tensor& t) { return t.defined() ? t.detach().to(at::kCPU, at::kDouble) : t; };
  auto grad = [&](const at::Tensor& t) { return host(t.grad()); };
  at::Tensor phantom;
  if (out.lse.defined()) {
    const auto sink = effective_sink_logit(arm, params, l.q.size(1), out.lse.options());
    if (sink.defined()) phantom = host(phantom_mass(out.lse, sink));
  }
  return {host(out.o), host(out.lse), phantom,   grad(l.q), grad(l.k),
          grad(l.v),   grad(l.b),     grad(l.tau), grad(l.w), grad(l.c)};
}

inline ArmRun run_arm(const ArmSpec& arm, const ArmLeaves& l, AttentionBackend backend, bool lse_in_loss = false) {
  const ArmAttend attend = [backend](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q,
                                     const PreparedKeys& keys) { return arm_attention(a, p, q, keys, false, backend); };
  return run_arm_with(arm, l, backend, attend, lse_in_loss);
}

/// Every output and gradient of two runs within `tol` (normalised error, parity_helpers.h).
inline void expect_arm_runs_close(const ArmRun& got, const ArmRun& want, double tol, const std::string& what) {
  expect_close(got.o, want.o, tol, what + " o");
  expect_close(got.lse, want.lse, tol, what + " lse");
  expect_close(got.phantom, want.phantom, tol, what + " phantom mass");
  expect_close(got.dq, want.dq, tol, what + " dq");
  expect_close(got.dk, want.dk, tol, what + " dk");
  expect_close(got.dv, want.dv, tol, what + " dv");
  expect_close(got.db, want.db, tol, what + " d b_h");
  expect_close(got.dtau, want.dtau, tol, what + " d tau_h");
  expect_close(got.dw, want.dw, tol, what + " d w_h");
  expect_close(got.dc, want.dc, tol, what + " d c_h");
}

/// Values rounded to what a half-precision run sees: q, k, v in `dtype`, parameters in float32.
inline ArmLeaves rounded(const ArmLeaves& s, at::ScalarType dtype) {
  auto r = [](const at::Tensor& t, at::ScalarType type) { return t.to(type).to(at::kDouble); };
  return {r(s.q, dtype), r(s.k, dtype), r(s.v, dtype), r(s.b, at::kFloat), r(s.tau, at::kFloat), r(s.w, at::kFloat),
          r(s.c, at::kFloat)};
}

/// A yardstick with the flash kernels' rounding of P: scores, routing bias, sink and softmax in
/// float32 (the kernels' accumulators), then P rounded to q's dtype before P . v, whose result is
/// rounded too; autograd then rounds dP and dv as products in that dtype. (The reference backend
/// rounds only o.) Square causal attention (Tq = Tk), no key mask; lse in float32.
inline AttentionResult attention_rounding_p(const AttentionInputs& in) {
  EXPECT_EQ(in.q.size(2), in.k.size(2)) << "attention_rounding_p: square causal attention only";
  EXPECT_FALSE(in.key_mask.defined()) << "attention_rounding_p: no key mask";
  const int64_t B = in.q.size(0), H = in.q.size(1), T = in.q.size(2);
  const double scale = in.scale > 0 ? in.scale : 1.0 / std::sqrt(static_cast<double>(in.q.size(3)));
  auto s = at::matmul(in.q.to(at::kFloat), in.k.to(at::kFloat).transpose(-2, -1)) * scale;
  if (in.routing_bias.defined()) s = s + in.routing_bias.to(at::kFloat).unsqueeze(-2);
  const auto future = at::ones({T, T}, in.q.options().dtype(at::kBool)).triu(1);
  s = s.masked_fill(future, -std::numeric_limits<double>::infinity());
  if (in.sink_logit.defined()) {
    s = at::cat({s, in.sink_logit.to(at::kFloat).view({1, H, 1, 1}).expand({B, H, T, 1})}, -1);
  }
  AttentionResult out;
  out.lse = at::logsumexp(s, -1);
  out.o = at::matmul(at::softmax(s, -1).narrow(-1, 0, T).to(in.q.scalar_type()), in.v);
  return out;
}

/// attention_rounding_p as the attention step of run_arm_with.
inline ArmRun run_arm_rounding_p(const ArmSpec& arm, const ArmLeaves& l) {
  const ArmAttend attend = [](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q, const PreparedKeys& keys) {
    return attention_rounding_p(arm_attention_inputs(a, p, q, keys));
  };
  return run_arm_with(arm, l, AttentionBackend::reference, attend, /*lse_in_loss=*/true);
}

/// flash-attention's rule for half precision: against an exact (float64) run on the same rounded
/// inputs, the error of `got` may be at most `factor` (2) times `yardstick_error`, the error of a
/// composed-op run in the same precision, plus `floor` for when both are tiny (normalised errors).
inline void expect_within_rule(const at::Tensor& got, double yardstick_error, const at::Tensor& exact,
                               const std::string& what, double floor, double factor = 2.0) {
  ASSERT_EQ(got.defined(), exact.defined()) << what;
  if (!exact.defined()) return;
  const double err = normalised_error(got, exact);
  EXPECT_LE(err, factor * yardstick_error + floor)
      << what << ": error " << err << ", yardstick error " << yardstick_error << " (allowed " << factor << "x)";
}

/// The rule with the reference run `low` as the yardstick.
inline void expect_within_rule(const at::Tensor& got, const at::Tensor& low, const at::Tensor& exact,
                               const std::string& what, double floor) {
  if (exact.defined()) ASSERT_TRUE(low.defined()) << what;
  expect_within_rule(got, exact.defined() ? normalised_error(low, exact) : 0.0, exact, what, floor);
}

/// Floor of the rule in bfloat16 / float16: a few ulp of bfloat16's 8-bit mantissa.
constexpr double kHalfRuleFloor = 2e-3;

/// How a half-precision run is held to the rule (docs/kernels.md, "Precision in bfloat16 / float16").
struct HalfRule {
  double floor = kHalfRuleFloor;
  const ArmRun* rounding_p = nullptr;  ///< run_arm_rounding_p on the same leaves: a second yardstick for gradients
  double param_factor = 2.0;           ///< for d b_h, d tau_h, d w_h, d c_h
  double lse_floor = 1e-4;             ///< lse and phantom mass stay float32 in every backend
};

/// The factor for the arm parameters' gradients in half precision. Each sums B x T per-key or per-row
/// values, and nearly cancels: sum_j dS_ij = dlse_i per row, so d c_h, whose weights (1 - g_j) are
/// near 1, is mostly that cancellation, and flash kernels take D_i = dO_i . o_i from the rounded o.
/// Measured on CPU (tests/parity/test_flash_key_columns.cpp): see docs/kernels.md.
inline constexpr double kFlashParamFactor = 3.0;

/// The rule for every output and gradient of an arm run. o, lse and the phantom mass are held to the
/// reference backend run in the same precision (`low`), which computes in float32 and rounds only o.
/// Gradients, when rule.rounding_p is given, to the larger of its error and rounding_p's: flash
/// kernels round P (and dS) to the half type before their products.
inline void expect_run_within_rule(const ArmRun& got, const ArmRun& low, const ArmRun& exact, const std::string& what,
                                   const HalfRule& rule = {}) {
  const double lse_floor = std::min(rule.floor, rule.lse_floor);
  expect_within_rule(got.o, low.o, exact.o, what + " o", rule.floor);
  expect_within_rule(got.lse, low.lse, exact.lse, what + " lse", lse_floor);
  expect_within_rule(got.phantom, low.phantom, exact.phantom, what + " phantom mass", lse_floor);
  auto grad = [&](at::Tensor ArmRun::*field, const char* name, double factor) {
    const auto& e = exact.*field;
    double yardstick = e.defined() ? normalised_error(low.*field, e) : 0.0;
    if (rule.rounding_p != nullptr && e.defined()) {
      yardstick = std::max(yardstick, normalised_error(rule.rounding_p->*field, e));
    }
    expect_within_rule(got.*field, yardstick, e, what + " " + name, rule.floor, factor);
  };
  grad(&ArmRun::dq, "dq", 2.0);
  grad(&ArmRun::dk, "dk", 2.0);
  grad(&ArmRun::dv, "dv", 2.0);
  grad(&ArmRun::db, "d b_h", rule.param_factor);
  grad(&ArmRun::dtau, "d tau_h", rule.param_factor);
  grad(&ArmRun::dw, "d w_h", rule.param_factor);
  grad(&ArmRun::dc, "d c_h", rule.param_factor);
}

/// `name` as an arm; "renorm_proj" is renorm with the projection gate form (SPEC: configurable).
inline ArmSpec arm_named(const std::string& name) {
  return name == "renorm_proj" ? with_routing_gate(arm_by_name("renorm"), GateKind::projection) : arm_by_name(name);
}

/// Every in-attention arm, plus renorm_proj. sink_token acts on the sequence (model-level tests).
inline std::vector<std::string> in_attention_arm_names() {
  std::vector<std::string> names;
  for (const auto& arm : all_arms())
    if (!arm.sink_token) names.push_back(arm.name);
  names.push_back("renorm_proj");
  return names;
}

}  // namespace attnlab::parity
