// Identities SPEC section 1 states: Lemma 3.1, arm reductions, renormalisation, numerics at the edges.
#include <gtest/gtest.h>

#include <cmath>

#include <torch/torch.h>

#include "attnlab/arm_attention.h"
#include "attnlab/arm_params.h"
#include "attnlab/gates.h"
#include "test_helpers.h"

namespace attnlab {
namespace {

using testing::max_abs_diff;

struct Qkv {
  at::Tensor q, k, v;
};

Qkv random_qkv(int64_t B, int64_t H, int64_t T, int64_t d, at::ScalarType dtype = at::kDouble, int seed = 0) {
  torch::manual_seed(seed);
  auto opts = torch::TensorOptions().dtype(dtype);
  return {torch::randn({B, H, T, d}, opts), torch::randn({B, H, T, d}, opts), torch::randn({B, H, T, d}, opts)};
}

AttentionResult run(const std::string& arm_name, const ArmLayerParams& p, const Qkv& x, bool probs = false) {
  const auto& arm = arm_by_name(arm_name);
  return arm_attention(arm, p, x.q, prepare_keys(arm, p, x.k, x.v), probs);
}

// Lemma 3.1: value-slot gating = routing-slot gating times Z_i = sum_j a_ij g_j (a without gate).
TEST(Identities, Lemma31ValueSlotIsRoutingSlotTimesZ) {
  const auto x = random_qkv(2, 3, 9, 8);
  ArmLayerParams p;
  p.gate_tau = torch::tensor({-0.1, 0.3, 0.6}, torch::kDouble);
  const auto value_slot = run("norm_gate", p, x).o;
  const auto routing_slot = run("renorm", p, x).o;
  const auto a = run("baseline", p, x, /*probs=*/true).probs;                      // (B, H, T, T)
  const auto g = prepare_keys(arm_by_name("norm_gate"), p, x.k, x.v).gate;          // (B, H, T)
  const auto Z = (a * g.unsqueeze(-2)).sum(-1, /*keepdim=*/true);                   // (B, H, T, 1)
  EXPECT_TRUE((Z <= 1.0 + 1e-15).all().item<bool>());
  EXPECT_LT(max_abs_diff(value_slot, Z * routing_slot), 1e-13);
}

TEST(Identities, OffByOneIsSinkLogitAtZero) {
  const auto x = random_qkv(2, 3, 7, 4);
  ArmLayerParams p;
  p.sink_logit = torch::zeros({3}, torch::kDouble);
  EXPECT_EQ(max_abs_diff(run("off_by_one", {}, x).o, run("sink_logit", p, x).o), 0.0);
  EXPECT_EQ(max_abs_diff(run("off_by_one", {}, x).lse, run("sink_logit", p, x).lse), 0.0);
}

TEST(Identities, ComboWithGatePinnedOpenIsSinkLogit) {
  const auto x = random_qkv(2, 3, 7, 4);
  ArmLayerParams p;
  p.sink_logit = torch::tensor({0.5, -1.0, 2.0}, torch::kDouble);
  p.gate_tau = torch::full({3}, -1e6, torch::kDouble);          // sigmoid(8e6) == 1 exactly
  EXPECT_EQ(max_abs_diff(run("combo", p, x).o, run("sink_logit", p, x).o), 0.0);
  p.gate_w = torch::zeros({3, 4}, torch::kDouble);
  p.gate_c = torch::full({3}, 1e3, torch::kDouble);             // sigmoid(1000) == 1 exactly
  EXPECT_EQ(max_abs_diff(run("combo2", p, x).o, run("sink_logit", p, x).o), 0.0);
}

TEST(Identities, RenormRowsSumToOne) {
  const auto x = random_qkv(2, 3, 11, 4);
  ArmLayerParams p;
  p.gate_tau = torch::tensor({0.5, 1.0, 2.0}, torch::kDouble);  // gates well below 1
  const auto probs = run("renorm", p, x, true).probs;
  EXPECT_LT((probs.sum(-1) - 1.0).abs().max().item<double>(), 1e-14);
  // ... whereas the value-slot gate loses mass: rows of a_ij g_j sum below 1.
  const auto g = prepare_keys(arm_by_name("norm_gate"), p, x.k, x.v).gate;
  const auto a = run("baseline", p, x, true).probs;
  EXPECT_LT((a * g.unsqueeze(-2)).sum(-1).max().item<double>(), 1.0);
}

TEST(Identities, LargeSinkLogitSilencesTheHead) {
  const auto x = random_qkv(1, 2, 6, 4);
  ArmLayerParams p;
  p.sink_logit = torch::full({2}, 40.0, torch::kDouble);
  const auto out = run("sink_logit", p, x);
  EXPECT_LT(out.o.abs().max().item<double>(), 1e-12);  // |o| <= exp(s_max - 40) * max|v|
  EXPECT_NEAR(phantom_mass(out.lse, p.sink_logit).min().item<double>(), 1.0, 1e-12);
}

TEST(Identities, SinkLogitPlusMinus100IsFiniteInFloat32) {
  const auto x = random_qkv(2, 2, 8, 4, at::kFloat);
  for (double b : {100.0, -100.0}) {
    ArmLayerParams p;
    p.sink_logit = torch::full({2}, b, torch::kFloat).requires_grad_(true);
    auto q = x.q.clone().requires_grad_(true);
    auto out = run("sink_logit", p, {q, x.k, x.v});
    out.o.sum().backward();
    EXPECT_TRUE(torch::isfinite(out.o).all().item<bool>()) << "b = " << b;
    EXPECT_TRUE(torch::isfinite(out.lse).all().item<bool>()) << "b = " << b;
    EXPECT_TRUE(torch::isfinite(q.grad()).all().item<bool>()) << "b = " << b;
    EXPECT_TRUE(torch::isfinite(p.sink_logit.grad()).all().item<bool>()) << "b = " << b;
    if (b > 0) {
      EXPECT_LT(out.o.abs().max().item<float>(), 1e-30f);
      EXPECT_NEAR(out.lse.min().item<float>(), 100.0f, 1e-4f);
    } else {
      EXPECT_LT(max_abs_diff(out.o, run("baseline", {}, x).o), 1e-6);  // exp(-100) is nothing
    }
  }
}

TEST(Identities, FullyMaskedRowsGiveZeroOutputAndLseEqualToSink) {
  const auto x = random_qkv(2, 2, 5, 4);
  AttentionInputs in{x.q.clone().requires_grad_(true), x.k, x.v};
  in.key_mask = torch::ones({2, 5}, torch::kBool);
  in.key_mask[1].fill_(false);  // batch 1: every key masked
  in.sink_logit = torch::tensor({0.7, -1.3}, torch::kDouble);
  auto out = reference_attention(in);
  EXPECT_EQ(out.o[1].abs().max().item<double>(), 0.0);
  EXPECT_LT((out.lse[1] - in.sink_logit.view({2, 1})).abs().max().item<double>(), 1e-15);
  out.o.sum().backward();
  EXPECT_TRUE(torch::isfinite(in.q.grad()).all().item<bool>());

  in.sink_logit = at::Tensor();  // no sink: lse = -inf, o = 0, gradients finite
  in.q = x.q.clone().requires_grad_(true);
  out = reference_attention(in);
  EXPECT_EQ(out.o[1].abs().max().item<double>(), 0.0);
  EXPECT_TRUE(torch::isinf(out.lse[1]).all().item<bool>());
  out.o.sum().backward();
  EXPECT_TRUE(torch::isfinite(in.q.grad()).all().item<bool>());
}

TEST(Identities, GatesStartNearlyOpen) {
  const double sigma4 = 1.0 / (1.0 + std::exp(-4.0));  // 0.98201379...
  EXPECT_NEAR(sigma4, 0.9820137900379085, 1e-15);
  const int64_t H = 2, d = 4;
  GateParams norm{GateKind::norm, torch::full({H}, kNormGateTauInit, torch::kDouble)};
  auto zero_v = torch::zeros({1, H, 3, d}, torch::kDouble);
  EXPECT_NEAR(torch::sigmoid(gate_logits(zero_v, norm)).min().item<double>(), sigma4, 1e-15);
  auto v = torch::randn({1, H, 3, d}, torch::kDouble);  // any read only opens the norm gate further
  EXPECT_GE(torch::sigmoid(gate_logits(v, norm)).min().item<double>(), sigma4);
  GateParams proj{GateKind::projection, {}, torch::zeros({H, d}, torch::kDouble),
                  torch::full({H}, kProjGateBiasInit, torch::kDouble)};
  EXPECT_LT((torch::sigmoid(gate_logits(v, proj)) - sigma4).abs().max().item<double>(), 1e-15);
}

TEST(Identities, BadShapesNameTheTensor) {
  const auto x = random_qkv(1, 2, 4, 4);
  AttentionInputs in{x.q, x.k, x.v};
  in.sink_logit = torch::zeros({3}, torch::kDouble);
  try {
    reference_attention(in);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sink_logit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnlab
