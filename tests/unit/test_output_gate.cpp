// The output gate (docs/arms.md, "The output gate"): its values and the gated heads against plain
// loops, finiteness at saturated arguments, its parameters, initial values and decay rule, and the
// paired start: an output-gate model computes baseline's attention times sigmoid(4) at step 0.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include <torch/torch.h>

#include "attnlab/arm_attention.h"
#include "attnlab/arm_params.h"
#include "attnlab/attention_backend.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/output_gate.h"
#include "attnlab/param_groups.h"
#include "attnlab/probe_measures.h"
#include "attnlab/probe_result.h"
#include "attnlab/probes.h"
#include "loop_oracle.h"
#include "test_helpers.h"

namespace attnlab {
namespace {

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

TEST(OutputGate, ValuesEqualAPlainLoop) {
  const int64_t B = 2, T = 3, D = 5, G = 4;
  auto x = torch::randn({B, T, D}, at::kDouble), w = torch::randn({D, G}, at::kDouble);
  auto c = torch::randn({G}, at::kDouble);
  const auto gamma = output_gate_values(x, w, c);
  ASSERT_EQ(gamma.sizes(), (std::vector<int64_t>{B, T, G}));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t g = 0; g < G; ++g) {
        double z = c[g].item<double>();
        for (int64_t i = 0; i < D; ++i) z += x[b][t][i].item<double>() * w[i][g].item<double>();
        EXPECT_NEAR(gamma[b][t][g].item<double>(), sigmoid(z), 1e-15);
      }
}

TEST(OutputGate, SaturatedGatesAreFiniteWithZeroGradient) {
  auto x = torch::ones({1, 1, 2}, at::kFloat);
  auto w = torch::zeros({2, 2}, at::kFloat).requires_grad_(true);
  auto c = torch::tensor({1e30f, -1e30f}).requires_grad_(true);
  const auto gamma = output_gate_values(x, w, c);
  EXPECT_EQ(gamma[0][0][0].item<float>(), 1.0f);
  EXPECT_EQ(gamma[0][0][1].item<float>(), 0.0f);
  gamma.sum().backward();
  EXPECT_TRUE(torch::isfinite(c.grad()).all().item<bool>());
  EXPECT_EQ(c.grad().abs().max().item<float>(), 0.0f);
}

TEST(OutputGate, GatedHeadsEqualAPlainLoop) {
  const int64_t B = 2, H = 3, T = 4, d = 2;
  auto o = torch::randn({B, H, T, d}, at::kDouble);
  auto head = torch::rand({B, T, H}, at::kDouble), channel = torch::rand({B, T, H * d}, at::kDouble);
  const auto yh = gated_heads(o, head, OutputGate::headwise), ye = gated_heads(o, channel, OutputGate::elementwise);
  const auto yn = gated_heads(o, at::Tensor(), OutputGate::none);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < d; ++e) {
          const double read = o[b][h][t][e].item<double>();
          EXPECT_EQ(yn[b][t][h * d + e].item<double>(), read);
          EXPECT_DOUBLE_EQ(yh[b][t][h * d + e].item<double>(), read * head[b][t][h].item<double>());
          EXPECT_DOUBLE_EQ(ye[b][t][h * d + e].item<double>(), read * channel[b][t][h * d + e].item<double>());
        }
  EXPECT_THROW(gated_heads(o, channel, OutputGate::headwise), std::invalid_argument);
  EXPECT_THROW(output_gate_values(torch::ones({1, 2, 3}), torch::ones({4, 2}), torch::ones({2})), std::invalid_argument);
}

// The layer's path (reference and fused attention, then the gate) against the plain-loop oracle,
// every output-gate arm, on random inputs of an odd length with the gate away from its init.
TEST(OutputGate, LayerPathEqualsTheLoopOracle) {
  const int B = 2, H = 3, T = 7, d = 4, D = H * d;
  torch::manual_seed(5);
  auto draw = [](at::IntArrayRef shape) { return torch::randn(shape, at::kDouble); };
  const auto q = draw({B, H, T, d}), k = draw({B, H, T, d}), v = draw({B, H, T, d}), x = draw({B, T, D});
  const auto b = draw({H});
  for (const char* name : {"out_gate", "out_gate_elem", "sink_out_gate"}) {
    const auto& arm = arm_by_name(name);
    const int G = arm.out_gate == OutputGate::headwise ? H : D;
    const auto w = draw({D, G}), c = draw({G});
    testing::LoopInputs in{B, H, T, d, testing::to_vector(q), testing::to_vector(k), testing::to_vector(v),
                           testing::to_vector(b), {}, {}, {}};
    const auto core = testing::loop_attention(arm, in);
    const auto want = testing::loop_output_gate(arm, core.o, B, H, T, d, testing::to_vector(x),
                                                testing::to_vector(w), testing::to_vector(c));
    ArmLayerParams params;
    if (arm.sink == SinkKind::learned) params.sink_logit = b;
    for (auto backend : {AttentionBackend::reference, AttentionBackend::fused}) {
      const auto keys = prepare_keys(arm, params, k, v, false, backend);
      const auto o = arm_attention(arm, params, q, keys, false, backend).o;
      const auto y = gated_heads(o, output_gate_values(x, w, c), arm.out_gate);  // [B, T, H d]
      const auto got = testing::to_vector(y.view({B, T, H, d}).transpose(1, 2).contiguous());
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      EXPECT_LT(worst, 1e-12) << name << " " << to_string(backend);
    }
  }
}

ModelConfig micro(const std::string& arm) {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 128, cfg.block_size = 32, cfg.vocab_size = 64;
  return cfg;
}

GPT build(const ModelConfig& cfg, uint64_t seed) {
  GPT model(cfg);
  init_parameters(*model, seed);
  return model;
}

// docs/arms.md's figures: 258, 16,512 and 260 parameters per layer at micro (d_model 128, H 2).
TEST(OutputGate, ParametersInitialValuesAndDecay) {
  for (const auto& [arm, per_layer] : std::map<std::string, int64_t>{{"out_gate", 258}, {"out_gate_elem", 16512},
                                                                      {"sink_out_gate", 260}}) {
    const auto cfg = micro(arm);
    EXPECT_EQ(count_params(cfg).arm_extra, cfg.n_layer * per_layer) << arm;
    auto model = build(cfg, 3);
    auto params = model->named_parameters();
    const int64_t G = arm == "out_gate_elem" ? 128 : 2;
    EXPECT_EQ(params["h.1.attn.out_gate_w"].sizes(), (std::vector<int64_t>{128, G})) << arm;
    EXPECT_TRUE(torch::equal(params["h.1.attn.out_gate_w"], torch::zeros({128, G}))) << arm;
    EXPECT_TRUE(torch::equal(params["h.0.attn.out_gate_c"], torch::full({G}, kOutGateBiasInit))) << arm;
    EXPECT_FALSE(model->decays("h.0.attn.out_gate_w")) << "arm parameters take no weight decay, matrices included";
    const auto groups = parameter_groups(*model);
    const std::set<std::string> no_decay(groups.no_decay_names.begin(), groups.no_decay_names.end());
    EXPECT_TRUE(no_decay.count("h.0.attn.out_gate_w") && no_decay.count("h.0.attn.out_gate_c")) << arm;
  }
}

// Same seed, same shared parameters: at step 0 every head's output is baseline's times sigmoid(4),
// so the layer's output before c_proj's bias is too.
TEST(OutputGate, StartsAsBaselineTimesSigmoidFour) {
  auto base = build(micro("baseline"), 11), gated = build(micro("out_gate"), 11), elem = build(micro("out_gate_elem"), 11);
  auto x = torch::randn({2, 7, 128});
  torch::NoGradGuard no_grad;
  for (auto* m : {&gated, &elem}) {
    auto& layer = *(*m)->h[0]->as<Block>()->attn;
    const auto& b = *base->h[0]->as<Block>()->attn;
    EXPECT_TRUE(torch::equal(layer.c_attn->weight, b.c_attn->weight)) << "paired seeds share W_q, W_k, W_v";
    const auto bias = layer.c_proj->bias;
    const auto got = layer.forward(x, 0) - bias, want = (base->h[0]->as<Block>()->attn->forward(x, 0) - bias) * sigmoid(4.0);
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-5);
  }
}

// Hand-made gates: per head, the mean of its values and the share below 0.1 (the paper's sparsity),
// over positions (and, elementwise, the head's channels); none for an arm without an output gate.
TEST(OutputGate, ProbeMeasuresAreTheMeanAndTheShareBelowOneTenth) {
  const int64_t B = 1, H = 2, T = 2;
  LayerProbeInputs in;
  in.probs = torch::tensor({1.0, 0.0, 0.5, 0.5}).view({1, 1, T, T}).expand({B, H, T, T}).contiguous();
  in.read_norm = torch::ones({B, H, T});
  in.out_gate = torch::tensor({0.05, 0.5, 0.2, 0.9}, at::kDouble).view({B, T, H});  // [t][h]
  LayerProbeSums head(H);
  accumulate_layer(in, head);
  EXPECT_DOUBLE_EQ(head.out_gate_mean.mean(0), (0.05 + 0.2) / 2);
  EXPECT_DOUBLE_EQ(head.out_gate_mean.mean(1), (0.5 + 0.9) / 2);
  EXPECT_DOUBLE_EQ(head.out_gate_sparse_share.mean(0), 0.5);
  EXPECT_DOUBLE_EQ(head.out_gate_sparse_share.mean(1), 0.0);

  in.out_gate = torch::tensor({0.01, 0.02, 0.3, 0.4, 0.5, 0.09, 0.7, 0.8}, at::kDouble).view({B, T, H * 2});
  LayerProbeSums elem(H);
  accumulate_layer(in, elem);  // head 0: 0.01 0.02 | 0.5 0.09; head 1: 0.3 0.4 | 0.7 0.8
  EXPECT_DOUBLE_EQ(elem.out_gate_mean.mean(0), (0.01 + 0.02 + 0.5 + 0.09) / 4);
  EXPECT_DOUBLE_EQ(elem.out_gate_sparse_share.mean(0), 0.75);
  EXPECT_DOUBLE_EQ(elem.out_gate_sparse_share.mean(1), 0.0);

  const auto with = probe_summary({head}, ProbeFeatures{false, false, true});
  const auto without = probe_summary({head}, ProbeFeatures{false, false, false});
  EXPECT_DOUBLE_EQ(*with.model["out_gate_sparse_share"], 0.25);
  EXPECT_FALSE(without.model["out_gate_mean"].has_value());
  EXPECT_NO_THROW(check_probe_summary(with, ProbeFeatures{false, false, true}, 1, H));
  EXPECT_THROW(check_probe_summary(with, ProbeFeatures{false, false, false}, 1, H), std::invalid_argument);
  in.out_gate = torch::ones({B, T, 3});
  EXPECT_THROW(accumulate_layer(in, head), std::invalid_argument) << "3 gate values do not split over 2 heads";
}

// probe.json written before the output gate's measures still reads (null), and sink_state round-trips.
TEST(OutputGate, ProbeJsonRoundTripsAndOlderFilesRead) {
  LayerProbeInputs in;
  in.probs = torch::tensor({1.0, 0.0, 0.5, 0.5}).view({1, 1, 2, 2});
  in.read_norm = torch::ones({1, 1, 2});
  LayerProbeSums sums(1);
  accumulate_layer(in, sums);
  const auto summary = probe_summary({sums}, ProbeFeatures{false, false});
  auto j = to_json(summary);
  for (auto* obj : {&j["model"], &j["layers"][0]["mean"], &j["layers"][0]["heads"]})
    for (const char* m : {"out_gate_mean", "out_gate_sparse_share"}) obj->erase(m);
  const auto back = probe_summary_from_json(j, ProbeFeatures{false, false});
  EXPECT_NO_THROW(check_probe_summary(back, ProbeFeatures{false, false}, 1, 1));
  EXPECT_DOUBLE_EQ(*back.model["first_key_mass"], 0.5);
  EXPECT_THROW(probe_summary_from_json(j, ProbeFeatures{false, false, true}), std::invalid_argument) << "an output-gate arm needs them";

  ProbeResult r;
  r.provenance.arm = "out_gate";
  r.summary = probe_summary({sums}, ProbeFeatures{false, false, true});
  r.sink_state = SinkStateRatio{std::numeric_limits<double>::infinity(), 2};
  const auto read = probe_result_from_json(to_json(r));
  ASSERT_TRUE(read.sink_state.has_value());
  EXPECT_EQ(read.sink_state->max_ratio, std::numeric_limits<double>::infinity());
  EXPECT_EQ(read.sink_state->layer, 2);
}

}  // namespace
}  // namespace attnlab
