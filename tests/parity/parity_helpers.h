// Shared pieces of the parity suites (fused vs the composed-op reference): seeded inputs, one
// forward + backward of an attention call, and a normalised error that names what differed.
#pragma once

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "attnlab/attention.h"
#include "attnlab/fused_attention.h"
#include "attnlab/half_precision_rule.h"

namespace attnlab::parity {

/// One attention call's configuration.
struct Case {
  int64_t B = 2, H = 3, Tq = 7, Tk = 7, d = 16;
  at::ScalarType dtype = at::kDouble;
  bool sink = false, bias = false, mask = false;
  double sink_value = 0.0;  ///< 0: random b_h ~ N(0, 1); otherwise every b_h equals it
  uint64_t seed = 1;
};

/// Leaf tensors of one case (requires_grad on the differentiable ones), CPU unless moved.
struct Leaves {
  at::Tensor q, k, v, bias, sink, mask;
};

inline Leaves make_leaves(const Case& c, const at::Device& device = at::kCPU) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(c.seed);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  auto randn = [&](at::IntArrayRef shape) { return at::normal(0.0, 1.0, shape, gen, opts); };
  const auto acc = c.dtype == at::kDouble ? at::kDouble : at::kFloat;
  auto leaf = [&](const at::Tensor& t, at::ScalarType type) {
    return t.to(device, type).detach().requires_grad_(true);
  };
  Leaves l;
  l.q = leaf(randn({c.B, c.H, c.Tq, c.d}), c.dtype);
  l.k = leaf(randn({c.B, c.H, c.Tk, c.d}), c.dtype);
  l.v = leaf(randn({c.B, c.H, c.Tk, c.d}), c.dtype);
  if (c.bias) l.bias = leaf(randn({c.B, c.H, c.Tk}) - 1.0, acc);  // like log g_j: mostly negative
  if (c.sink) l.sink = leaf(c.sink_value != 0.0 ? at::full({c.H}, c.sink_value, opts) : randn({c.H}), acc);
  if (c.mask) {
    // Batch 0 loses its first third of keys, so its early queries see no key at all; batch 1 loses
    // every third key.
    auto m = at::ones({c.B, c.Tk}, at::kBool);
    m[0].narrow(0, 0, std::max<int64_t>(1, c.Tk / 3)).fill_(false);
    if (c.B > 1) m[1].slice(0, 0, c.Tk, 3).fill_(false);
    l.mask = m.to(device);
  }
  return l;
}

/// Outputs and gradients of loss = sum(o * R) + sum(lse' * S), lse' = lse with -inf rows set to 0.
/// The same leaves in float64 (exact upcasts, fresh leaves): the reference a float32 kernel is held
/// to, so a tolerance measures the kernel's own rounding and not the float32 reference's too.
inline Leaves as_double(const Leaves& l) {
  auto up = [](const at::Tensor& t) {
    return t.defined() ? t.detach().to(at::kDouble).requires_grad_(true) : at::Tensor();
  };
  return {up(l.q), up(l.k), up(l.v), up(l.bias), up(l.sink), l.mask};
}

struct Run {
  at::Tensor o, lse, dq, dk, dv, dbias, dsink;
};

inline Run run_attention(const Leaves& l, bool fused, const FusedTiling& tiling = {}, bool lse_in_loss = true,
                         uint64_t seed = 7) {
  for (const auto* t : {&l.q, &l.k, &l.v, &l.bias, &l.sink}) {
    if (t->defined() && t->grad().defined()) t->mutable_grad().reset();
  }
  AttentionInputs in{l.q, l.k, l.v, l.bias, l.sink, l.mask};
  auto out = fused ? fused_attention(in, tiling) : reference_attention(in);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto R = at::normal(0.0, 1.0, out.o.sizes(), gen, at::TensorOptions().dtype(at::kDouble)).to(out.o.options());
  auto loss = (out.o * R).sum();
  if (lse_in_loss) {
    auto S = at::normal(0.0, 1.0, out.lse.sizes(), gen, at::TensorOptions().dtype(at::kDouble)).to(out.lse.options());
    auto finite = at::isfinite(out.lse);
    loss = loss + (at::where(finite, out.lse, at::zeros_like(out.lse)) * S).sum();
  }
  loss.backward();
  auto grad = [](const at::Tensor& t) { return t.defined() ? t.grad() : at::Tensor(); };
  return {out.o.detach(), out.lse.detach(), grad(l.q), grad(l.k), grad(l.v), grad(l.bias), grad(l.sink)};
}

/// max |a - b| / max(1, max |b|): the library's (half_precision_rule.h), which the rule uses too.
using attnlab::normalised_error;

inline void expect_close(const at::Tensor& got, const at::Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.defined(), want.defined()) << what << ": one side is missing";
  if (!got.defined()) return;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  if (got.numel() == 0) return;
  const double err = normalised_error(got, want);
  EXPECT_LE(err, tol) << what << ": normalised error " << err << " above " << tol;
  // ATTNLAB_PARITY_VERBOSE=1 prints every error, to see how much room each tolerance leaves.
  if (std::getenv("ATTNLAB_PARITY_VERBOSE")) std::cout << "  [parity] " << what << ": " << err << " (tol " << tol << ")\n";
}

/// Every output and gradient of two runs.
inline void expect_runs_close(const Run& got, const Run& want, double tol, const std::string& what) {
  expect_close(got.o, want.o, tol, what + " o");
  expect_close(got.lse, want.lse, tol, what + " lse");
  expect_close(got.dq, want.dq, tol, what + " dq");
  expect_close(got.dk, want.dk, tol, what + " dk");
  expect_close(got.dv, want.dv, tol, what + " dv");
  expect_close(got.dbias, want.dbias, tol, what + " d routing_bias");
  expect_close(got.dsink, want.dsink, tol, what + " d b_h");
}

}  // namespace attnlab::parity
