// Every in-attention arm's forward and backward against the plain loop (loop_oracle.h) in float64.
// Gradients of the loop come from central finite differences, so autograd is checked, not reused.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "attnlab/arm_attention.h"
#include "loop_oracle.h"
#include "test_helpers.h"
#include "extra_arm.h"

namespace attnlab {
namespace {

using testing::LoopInputs;
using testing::from_vector;
using testing::loop_attention;
using testing::to_vector;

constexpr int kB = 2, kH = 3, kT = 7, kD = 4;  // odd length on purpose

std::vector<double> randn(std::mt19937_64& rng, size_t n, double scale = 1.0) {
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> out(n);
  for (auto& x : out) x = dist(rng);
  return out;
}

LoopInputs random_inputs(uint64_t seed) {
  std::mt19937_64 rng(seed);
  LoopInputs in{kB, kH, kT, kD};
  const size_t n = size_t(kB) * kH * kT * kD;
  in.q = randn(rng, n), in.k = randn(rng, n), in.v = randn(rng, n);
  in.b = randn(rng, kH), in.tau = randn(rng, kH, 0.5), in.w = randn(rng, kH * kD), in.c = randn(rng, kH);
  return in;
}

struct TorchSide {
  at::Tensor q, k, v, b, tau, w, c;
  AttentionResult out;
  at::Tensor sink;
};

// The layer's attention path on `backend`, with the window of `in` (none when in.window = 0).
TorchSide run_reference(const ArmSpec& arm, const LoopInputs& in, AttentionBackend backend = AttentionBackend::reference) {
  TorchSide t;
  auto leaf = [](const std::vector<double>& x, at::IntArrayRef shape) {
    return from_vector(x, shape).requires_grad_(true);
  };
  t.q = leaf(in.q, {kB, kH, kT, kD}), t.k = leaf(in.k, {kB, kH, kT, kD}), t.v = leaf(in.v, {kB, kH, kT, kD});
  t.b = leaf(in.b, {kH}), t.tau = leaf(in.tau, {kH}), t.w = leaf(in.w, {kH, kD}), t.c = leaf(in.c, {kH});
  ArmLayerParams params;
  if (arm.sink == SinkKind::learned) params.sink_logit = t.b;
  if (arm.gate == GateKind::norm) params.gate_tau = t.tau;
  if (arm.gate == GateKind::projection) params.gate_w = t.w, params.gate_c = t.c;
  auto keys = prepare_keys(arm, params, t.k, t.v, false, backend);
  t.out = arm_attention(arm, params, t.q, keys, false, backend, AttentionWindow{in.window, in.keep_first});
  t.sink = effective_sink_logit(arm, params, kH, t.q.options());
  return t;
}

// d loss / d x[i] of the loop by central differences, loss = sum(o * R).
std::vector<double> loop_gradient(const ArmSpec& arm, LoopInputs in, std::vector<double> LoopInputs::*field,
                                  const std::vector<double>& R) {
  const double h = 1e-6;
  auto loss = [&](const LoopInputs& x) {
    auto o = loop_attention(arm, x).o;
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += o[i] * R[i];
    return s;
  };
  std::vector<double> grad((in.*field).size());
  for (size_t i = 0; i < grad.size(); ++i) {
    const double x0 = (in.*field)[i];
    (in.*field)[i] = x0 + h;
    const double up = loss(in);
    (in.*field)[i] = x0 - h;
    const double down = loss(in);
    (in.*field)[i] = x0;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << what << " at " << i;
}

class ArmVsLoop : public ::testing::TestWithParam<std::string> {};

TEST_P(ArmVsLoop, ForwardMatchesLoop) {
  const auto& arm = arm_by_name(GetParam());
  const auto in = random_inputs(11);
  const auto want = loop_attention(arm, in);
  const auto got = run_reference(arm, in);
  expect_close(to_vector(got.out.o), want.o, 1e-12, "o");       // float64 round-off only
  expect_close(to_vector(got.out.lse), want.lse, 1e-12, "lse");
  if (got.sink.defined()) expect_close(to_vector(phantom_mass(got.out.lse, got.sink)), want.phantom, 1e-12, "phantom");
}

// Every gradient of loss = sum(o * R) on `backend` against the loop's central differences (h = 1e-6
// in float64: truncation ~1e-12, round-off ~1e-10).
void expect_gradients_match_loop(const ArmSpec& arm, const LoopInputs& in, const std::vector<double>& R,
                                 AttentionBackend backend = AttentionBackend::reference) {
  auto t = run_reference(arm, in, backend);
  (t.out.o * from_vector(R, {kB, kH, kT, kD})).sum().backward();
  const double tol = 1e-7;
  expect_close(to_vector(t.q.grad()), loop_gradient(arm, in, &LoopInputs::q, R), tol, "dq");
  expect_close(to_vector(t.k.grad()), loop_gradient(arm, in, &LoopInputs::k, R), tol, "dk");
  expect_close(to_vector(t.v.grad()), loop_gradient(arm, in, &LoopInputs::v, R), tol, "dv");
  if (arm.sink == SinkKind::learned)
    expect_close(to_vector(t.b.grad()), loop_gradient(arm, in, &LoopInputs::b, R), tol, "d b_h");
  if (arm.gate == GateKind::norm)
    expect_close(to_vector(t.tau.grad()), loop_gradient(arm, in, &LoopInputs::tau, R), tol, "d tau_h");
  if (arm.gate == GateKind::projection) {
    expect_close(to_vector(t.w.grad()), loop_gradient(arm, in, &LoopInputs::w, R), tol, "d w_h");
    expect_close(to_vector(t.c.grad()), loop_gradient(arm, in, &LoopInputs::c, R), tol, "d c_h");
  }
}

TEST_P(ArmVsLoop, GradientsMatchFiniteDifferencesOfLoop) {
  const auto& arm = arm_by_name(GetParam());
  const auto in = random_inputs(23);
  std::mt19937_64 rng(5);
  expect_gradients_match_loop(arm, in, randn(rng, in.q.size()));
}

std::vector<std::string> in_attention_arms() {
  std::vector<std::string> names;
  for (const auto& arm : all_arms())  // output gates act after the core: test_output_gate's loops
    if (!arm.sink_token && arm.out_gate == OutputGate::none) names.push_back(arm.name);
  // renorm with the projection gate form (configurable, SPEC section 1).
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllArms, ArmVsLoop, ::testing::ValuesIn(in_attention_arms()),
                         [](const auto& info) { return info.param; });

// Sliding windows (docs/windows.md): every (W, n) that hides a key at T = 7, and W + n >= T, which
// must give full attention; the reference (a mask) and the fused kernels (the per-key rule inside
// a tile) against the loop's key set V(i).
TEST_P(ArmVsLoop, WindowedForwardMatchesLoop) {
  const auto& arm = arm_by_name(GetParam());
  for (int window : {1, 2, 3, 6, 7}) {
    for (int keep : {0, 1, 4}) {
      auto in = random_inputs(41);
      in.window = window, in.keep_first = keep;
      const auto want = loop_attention(arm, in);
      for (auto backend : {AttentionBackend::reference, AttentionBackend::fused}) {
        const auto got = run_reference(arm, in, backend);
        const auto what = "W " + std::to_string(window) + " n " + std::to_string(keep) + " on " + to_string(backend);
        expect_close(to_vector(got.out.o), want.o, 1e-12, (what + " o").c_str());
        expect_close(to_vector(got.out.lse), want.lse, 1e-12, (what + " lse").c_str());
      }
    }
  }
}

TEST_P(ArmVsLoop, WindowedGradientsMatchFiniteDifferencesOfLoop) {
  const auto& arm = arm_by_name(GetParam());
  auto in = random_inputs(43);
  in.window = 2, in.keep_first = 1;
  std::mt19937_64 rng(7);
  const auto R = randn(rng, in.q.size());
  for (auto backend : {AttentionBackend::reference, AttentionBackend::fused}) expect_gradients_match_loop(arm, in, R, backend);
}

TEST(ArmVsLoop, RenormWithProjectionGateMatchesLoop) {
  const auto arm = with_routing_gate(arm_by_name("renorm"), GateKind::projection);
  const auto in = random_inputs(31);
  const auto want = loop_attention(arm, in);
  const auto got = run_reference(arm, in);
  expect_close(to_vector(got.out.o), want.o, 1e-12, "o");
  expect_close(to_vector(got.out.lse), want.lse, 1e-12, "lse");
}

}  // namespace
}  // namespace attnlab
