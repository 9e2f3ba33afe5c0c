// One arm's attention layer, forward and backward, on any backend, device and dtype: the piece the
// CPU arm parity suite and the GPU suite share.
#pragma once

#include <torch/torch.h>

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

inline ArmRun run_arm(const ArmSpec& arm, const ArmLeaves& l, AttentionBackend backend, bool lse_in_loss = false) {
  for (const auto* t : {&l.q, &l.k, &l.v, &l.b, &l.tau, &l.w, &l.c}) {
    if (t->grad().defined()) t->mutable_grad().reset();
  }
  ArmLayerParams params;
  if (arm.sink == SinkKind::learned) params.sink_logit = l.b;
  if (arm.gate == GateKind::norm) params.gate_tau = l.tau;
  if (arm.gate == GateKind::projection) params.gate_w = l.w, params.gate_c = l.c;
  const auto keys = prepare_keys(arm, params, l.k, l.v, false, backend);
  const auto out = arm_attention(arm, params, l.q, keys, false, backend);
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
