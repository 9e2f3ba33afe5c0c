// Probe statistics of SPEC section 4 against closed forms and plain double loops: first-key mass,
// sink rate, phantom mass, read-norm ratio, exposure, gates, and the quiet-read cutoffs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "attnlab/attention.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/probe_result.h"
#include "attnlab/probes.h"
#include "extra_arm.h"
#include "unit/test_helpers.h"

namespace attnlab {
namespace {

using testing::to_vector;

// numpy's "linear" percentile of `values`, written out: sorted[q (n - 1)] interpolated.
double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double pos = q * double(values.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - double(lo)) * (values[hi] - values[lo]);
}

// Causal uniform attention a_ij = 1 / (i + 1): [1, H, T, T].
at::Tensor uniform_probs(int64_t H, int64_t T) {
  auto p = torch::zeros({1, H, T, T}, torch::kDouble);
  for (int64_t i = 0; i < T; ++i) p.select(2, i).narrow(2, 0, i + 1).fill_(1.0 / double(i + 1));
  return p;
}

// A random causal softmax [B, H, T, T] (float32, as the model gives it).
at::Tensor random_probs(int64_t B, int64_t H, int64_t T) {
  auto s = torch::randn({B, H, T, T});
  auto mask = torch::ones({T, T}, torch::kBool).triu(1);
  return torch::softmax(s.masked_fill(mask, -INFINITY), -1);
}

double mean_inverse(int64_t from, int64_t T, double extra = 0.0) {  // mean_{i=from}^{T-1} 1 / (extra + i + 1)
  double s = 0.0;
  for (int64_t i = from; i < T; ++i) s += 1.0 / (extra + double(i + 1));
  return s / double(T - from);
}

TEST(ProbeStats, UniformAttentionFirstKeyMassIsMeanOfInverse) {
  const int64_t H = 3, T = 7;
  LayerProbeSums sums(H);
  accumulate_layer({uniform_probs(H, T), torch::rand({1, H, T}) + 1, {}, {}}, sums);
  for (int64_t h = 0; h < H; ++h) {
    EXPECT_NEAR(sums.first_key_mass.mean(h), mean_inverse(1, T), 1e-15);  // query 0 excluded
    EXPECT_NEAR(sums.sink_score.mean(h), mean_inverse(0, T), 1e-15);
    EXPECT_TRUE(std::isnan(sums.phantom_mass.mean(h)));
  }
}

TEST(ProbeStats, RandomInputsMatchAPlainLoop) {
  torch::manual_seed(3);
  const int64_t B = 3, H = 2, T = 9;
  auto probs = random_probs(B, H, T);
  auto norms = torch::rand({B, H, T}) * 3;
  auto phantom = torch::rand({B, H, T});
  auto gate = torch::rand({B, H, T});
  LayerProbeSums sums(H);
  accumulate_layer({probs.narrow(0, 0, 2), norms.narrow(0, 0, 2), phantom.narrow(0, 0, 2), gate.narrow(0, 0, 2)}, sums);
  accumulate_layer({probs.narrow(0, 2, 1), norms.narrow(0, 2, 1), phantom.narrow(0, 2, 1), gate.narrow(0, 2, 1)}, sums);
  auto P = probs.to(torch::kDouble), N = norms.to(torch::kDouble), Ph = phantom.to(torch::kDouble), G = gate.to(torch::kDouble);
  for (int64_t h = 0; h < H; ++h) {
    double fk = 0, ratio = 0, expo = 0, ph = 0, g = 0, closed = 0;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> n(static_cast<size_t>(T)), rest;
      for (int64_t j = 0; j < T; ++j) n[size_t(j)] = N[b][h][j].item<double>();
      rest.assign(n.begin() + 1, n.end());
      ratio += n[0] / percentile(rest, 0.5);
      const double p25 = percentile(n, 0.25);
      for (int64_t i = 0; i < T; ++i) {
        if (i >= 1) fk += P[b][h][i][0].item<double>();
        for (int64_t j = 0; j <= i; ++j) expo += n[size_t(j)] < p25 ? P[b][h][i][j].item<double>() : 0.0;
        ph += Ph[b][h][i].item<double>();
        g += G[b][h][i].item<double>();
        closed += G[b][h][i].item<double>() < 0.5;
      }
    }
    EXPECT_NEAR(sums.first_key_mass.mean(h), fk / double(B * (T - 1)), 1e-12);
    EXPECT_NEAR(sums.read_norm_ratio.mean(h), ratio / double(B), 1e-12);
    EXPECT_NEAR(sums.exposure.mean(h), expo / double(B * T), 1e-12);
    EXPECT_NEAR(sums.phantom_mass.mean(h), ph / double(B * T), 1e-12);
    EXPECT_NEAR(sums.gate_mean.mean(h), g / double(B * T), 1e-12);
    EXPECT_NEAR(sums.gate_closed_share.mean(h), closed / double(B * T), 1e-15);
  }
}

TEST(ProbeStats, HandMadeExposureAndReadNormRatio) {
  // Norms 1, 4, 2, 8, 6: p25 of {1, 2, 4, 6, 8} is 2, so only position 0 is quiet; the median of
  // positions 1..4 is (4 + 6) / 2 = 5.
  auto norms = torch::tensor({1.0, 4.0, 2.0, 8.0, 6.0}, torch::kDouble).view({1, 1, 5});
  LayerProbeSums sums(1);
  accumulate_layer({uniform_probs(1, 5), norms, {}, {}}, sums);
  EXPECT_NEAR(sums.exposure.mean(0), mean_inverse(0, 5), 1e-15);
  EXPECT_NEAR(sums.read_norm_ratio.mean(0), 1.0 / 5.0, 1e-15);
}

TEST(ProbeStats, OneTokenSequencesLeaveTheRatioEmptyAndTheFirstKeyMassUndefined) {
  LayerProbeSums sums(1);
  accumulate_layer({torch::ones({2, 1, 1, 1}), torch::ones({2, 1, 1}), {}, {}}, sums);
  EXPECT_TRUE(std::isnan(sums.read_norm_ratio.mean(0)));
  EXPECT_TRUE(std::isnan(sums.first_key_mass.mean(0)));  // no query i >= 1
  EXPECT_DOUBLE_EQ(sums.sink_score.mean(0), 1.0);
  EXPECT_DOUBLE_EQ(sums.exposure.mean(0), 0.0);  // T = 1: nothing strictly below the percentile
}

TEST(ProbeStats, ShapeMismatchNamesTheTensor) {
  LayerProbeSums sums(2);
  try {
    accumulate_layer({uniform_probs(2, 4), torch::ones({1, 2, 5}), {}, {}}, sums);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("read_norm"), std::string::npos) << e.what();
  }
  EXPECT_THROW(accumulate_layer({uniform_probs(3, 4), torch::ones({1, 3, 4}), {}, {}}, sums), std::invalid_argument);
}

TEST(QuietReads, CutoffsSelectExactlyTheReadsBelowThePercentile) {
  torch::manual_seed(5);
  for (int64_t T : {1, 2, 5, 8, 33}) {
    auto norms = torch::rand({2, 3, T}, torch::kDouble);
    for (auto [cutoff, q] : {std::pair{QuietCutoff::median, 0.5}, std::pair{QuietCutoff::p25, 0.25}}) {
      auto quiet = quiet_reads(norms, cutoff);
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t h = 0; h < 3; ++h) {
          const auto row = to_vector(norms[b][h]);
          const double c = percentile(row, q);
          for (int64_t j = 0; j < T; ++j) EXPECT_EQ(quiet[b][h][j].item<bool>(), row[size_t(j)] < c) << T << " " << j;
        }
    }
  }
}

// Uniform attention over each query's window V(i) (docs/windows.md), written with plain loops:
// [1, H, T, T] with a_ij = 1 / |V(i)| on V(i).
at::Tensor windowed_uniform_probs(int64_t H, int64_t T, int64_t W, int64_t n) {
  auto p = torch::zeros({1, H, T, T}, torch::kDouble);
  auto a = p.accessor<double, 4>();
  for (int64_t i = 0; i < T; ++i) {
    int64_t seen = 0;
    for (int64_t j = 0; j <= i; ++j) seen += (i - j < W || j < n);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j <= i; ++j)
        if (i - j < W || j < n) a[0][h][i][j] = 1.0 / double(seen);
  }
  return p;
}

// The window measures (docs/windows.md, "Probes under a window") against means written out by hand.
TEST(ProbeStats, WindowedMeasuresAverageTheQueriesThatSeeTheKey) {
  const int64_t H = 2, T = 7;
  struct Want {
    int64_t W, n;
    double first_key, sink_score, oldest;
  };
  const double nan = std::nan("");
  for (const Want& w : {Want{3, 0, (1.0 / 2 + 1.0 / 3) / 2, (1 + 1.0 / 2 + 1.0 / 3) / 3, (1.0 / 2 + 5.0 / 3) / 6},
                        Want{3, 1, (1.0 / 2 + 1.0 / 3 + 4.0 / 4) / 6, (1 + 1.0 / 2 + 1.0 / 3 + 4.0 / 4) / 7,
                             (1.0 / 2 + 1.0 / 3 + 4.0 / 4) / 6},
                        Want{1, 0, nan, 1.0, nan}}) {
    LayerProbeSums sums(H);
    LayerProbeInputs in{windowed_uniform_probs(H, T, w.W, w.n), torch::rand({1, H, T}) + 1, {}, {}, {}, {w.W, w.n}};
    accumulate_layer(in, sums);
    const std::string what = "W " + std::to_string(w.W) + " n " + std::to_string(w.n);
    for (int64_t h = 0; h < H; ++h) {
      auto expect = [&](double got, double want, const char* name) {
        if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << what << " " << name << " = " << got;
        else EXPECT_NEAR(got, want, 1e-15) << what << " " << name;
      };
      expect(sums.first_key_mass.mean(h), w.first_key, "first_key_mass");
      expect(sums.sink_score.mean(h), w.sink_score, "sink_score");
      expect(sums.oldest_key_mass.mean(h), w.oldest, "oldest_key_mass");
    }
  }
  // A global layer: the oldest key is key 0, so the two measures agree.
  LayerProbeSums global(H);
  accumulate_layer({uniform_probs(H, T), torch::rand({1, H, T}) + 1, {}, {}}, global);
  EXPECT_DOUBLE_EQ(global.oldest_key_mass.mean(0), global.first_key_mass.mean(0));
}

// A windowed model's summary: layer types, by-type means over the heads of each type, the window
// measure applied, and the JSON round trip; a model without a window lists none of it.
TEST(ProbeSummary, WindowedSummaryCarriesLayerTypes) {
  std::vector<LayerProbeSums> layers(3, LayerProbeSums(2));
  for (int64_t l = 0; l < 3; ++l)
    for (int64_t h = 0; h < 2; ++h) {
      layers[l].first_key_mass.add(h, 0.1 * double(l + 1) + 0.01 * double(h), 1.0);
      layers[l].oldest_key_mass.add(h, 0.5, 1.0);
    }
  ProbeFeatures f{false, false, false, {true, false, true}};
  const auto s = probe_summary(layers, f);
  ASSERT_TRUE(s.local && s.global);
  EXPECT_EQ(s.layers[1].local, std::optional<bool>(false));
  EXPECT_NEAR(s.local->operator[]("first_key_mass").value(), (0.1 + 0.11 + 0.3 + 0.31) / 4, 1e-15);
  EXPECT_NEAR(s.global->operator[]("first_key_mass").value(), (0.2 + 0.21) / 2, 1e-15);
  EXPECT_DOUBLE_EQ(s.model["oldest_key_mass"].value(), 0.5);
  EXPECT_NO_THROW(check_probe_summary(s, f, 3, 2));
  EXPECT_THROW(check_probe_summary(s, ProbeFeatures{false, false, false, {true, true, true}}, 3, 2), std::invalid_argument);
  const auto j = to_json(s);
  EXPECT_EQ(j["layers"][0]["type"], "local");
  EXPECT_TRUE(j["by_type"]["global"].contains("oldest_key_mass"));
  const auto back = probe_summary_from_json(j, f);
  EXPECT_NO_THROW(check_probe_summary(back, f, 3, 2));
  EXPECT_THROW(probe_summary_from_json(j, ProbeFeatures{}), std::invalid_argument) << "types without a window";

  const auto plain = to_json(probe_summary(layers, ProbeFeatures{}));
  EXPECT_FALSE(plain.contains("by_type"));
  EXPECT_FALSE(plain["layers"][0].contains("type"));
  EXPECT_FALSE(plain["model"].contains("oldest_key_mass")) << "a model without a window writes what it wrote before";
  EXPECT_FALSE(plain["layers"][0]["heads"].contains("oldest_key_mass"));
}

TEST(QuietReads, TiesWithTheCutoffAreNotQuiet) {
  EXPECT_FALSE(quiet_reads(torch::full({1, 1, 6}, 2.0), QuietCutoff::median).any().item<bool>());
  auto norms = torch::tensor({1.0, 1.0, 1.0, 5.0}).view({1, 1, 4});  // p25 = 1, median = 1
  EXPECT_FALSE(quiet_reads(norms, QuietCutoff::p25).any().item<bool>());
  EXPECT_EQ(parse_quiet_cutoff("p25"), QuietCutoff::p25);
  EXPECT_THROW(parse_quiet_cutoff("p50"), std::invalid_argument);
}

TEST(ProbeSummary, SinkRateCountsHeadsAboveThreshold) {
  LayerProbeSums layer(4);
  for (int64_t h = 0; h < 4; ++h) layer.sink_score.add(h, h == 0 ? 0.9 : (h == 1 ? 0.31 : 0.3), 1.0);
  const auto s = probe_summary({layer}, ProbeFeatures{false, false});
  EXPECT_DOUBLE_EQ(s.layers[0].mean["sink_rate"].value(), 0.5);  // 0.3 itself is not above
  EXPECT_DOUBLE_EQ(s.model["sink_rate"].value(), 0.5);
  EXPECT_FALSE(s.model["phantom_mass"].has_value());
  EXPECT_FALSE(s.layers[0].mean["gate_mean"].has_value());
}

// A tiny model whose queries are all zero: every score is 0, so attention is uniform over the keys
// (and the phantom key): a_ij = 1 / (exp(b) + i + 1), p_i = exp(b) / (exp(b) + i + 1).
GPT zero_query_model(const std::string& arm, double sink_logit) {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.block_size = 16, cfg.vocab_size = 50;
  GPT model(cfg);
  init_parameters(*model, 7);
  torch::NoGradGuard no_grad;
  for (const auto& block : *model->h) {
    auto attn = block->as<Block>()->attn;
    attn->c_attn->weight.narrow(0, 0, cfg.d_model).zero_();
    attn->c_attn->bias.narrow(0, 0, cfg.d_model).zero_();
    if (auto* b = attn->named_parameters(false).find("sink_logit")) b->fill_(sink_logit);
  }
  return model;
}

std::vector<Batch> random_batches(int64_t n, int64_t B, int64_t T) {
  std::vector<Batch> out;
  for (int64_t i = 0; i < n; ++i) out.push_back({torch::randint(0, 50, {B, T}, torch::kLong), torch::randint(0, 50, {B, T}, torch::kLong)});
  return out;
}

TEST(ProbeModel, ZeroQueriesGiveTheClosedFormsThroughTheModel) {
  torch::manual_seed(1);
  const int64_t T = 12;
  const auto batches = random_batches(2, 3, T);
  auto base = probe_model(*zero_query_model("baseline", 0), batches, torch::kCPU);
  const double b = 1.5, eb = std::exp(b);
  auto sink = probe_model(*zero_query_model("sink_logit", b), batches, torch::kCPU);
  double phantom = 0;
  for (int64_t i = 0; i < T; ++i) phantom += eb / (eb + double(i + 1));
  phantom /= double(T);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_NEAR(base.layers[l].head_values("first_key_mass")[h].value(), mean_inverse(1, T), 1e-6);
      EXPECT_FALSE(base.layers[l].head_values("phantom_mass")[h].has_value());
      EXPECT_NEAR(sink.layers[l].head_values("first_key_mass")[h].value(), mean_inverse(1, T, eb), 1e-6);
      EXPECT_NEAR(sink.layers[l].head_values("phantom_mass")[h].value(), phantom, 1e-6);
    }
  EXPECT_NEAR(sink.model["phantom_mass"].value(), phantom, 1e-6);
}

TEST(ProbeModel, SinkTokenFirstKeyIsTheLearnedToken) {
  torch::manual_seed(2);
  const int64_t T = 6;  // T + 1 model positions: query i >= 1 sees i + 1 keys
  auto r = probe_model(*zero_query_model("sink_token", 0), random_batches(1, 2, T), torch::kCPU);
  EXPECT_NEAR(r.model["first_key_mass"].value(), mean_inverse(1, T + 1), 1e-6);
}

TEST(ProbeModel, GatedArmReportsItsGates) {
  torch::manual_seed(4);
  auto model = zero_query_model("proj_gate", 0);  // w_h = 0, c_h = 4 at init: g = sigmoid(4)
  model->set_attention_backend(AttentionBackend::fused);
  auto r = probe_model(*model, random_batches(1, 2, 5), torch::kCPU);
  EXPECT_NEAR(r.model["gate_mean"].value(), 1.0 / (1.0 + std::exp(-4.0)), 1e-6);
  EXPECT_DOUBLE_EQ(r.model["gate_closed_share"].value(), 0.0);
  EXPECT_EQ(model->h[0]->as<Block>()->attn->backend, AttentionBackend::fused);  // put back
}

// Every arm of the registry (the tenth-arm test's included) through probe_model, with zero queries and
// every gate held open (g_j = 1): attention is uniform over the keys and the sink term, so first-key
// mass, phantom mass and gates have closed forms that depend only on the arm's features.
class EveryArmProbe : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryArmProbe, ClosedFormsFromTheArmsFeatures) {
  torch::manual_seed(5);
  const auto& arm = arm_by_name(GetParam());
  const double b = arm.sink == SinkKind::learned ? 1.5 : 0.0;
  auto model = zero_query_model(arm.name, b);
  {
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {  // gates fully open: sigmoid(+large) = 1
      if (item.key().find("gate_tau") != std::string::npos) item.value().fill_(-100.0);
      if (item.key().find("gate_c") != std::string::npos) item.value().fill_(100.0);
      if (item.key().find("gate_w") != std::string::npos) item.value().zero_();
    }
  }
  const int64_t T = 7, positions = T + (arm.sink_token ? 1 : 0);
  const double eb = arm.sink == SinkKind::none ? 0.0 : std::exp(b);
  const auto r = probe_model(*model, random_batches(1, 2, T), torch::kCPU).model;
  EXPECT_NEAR(r["first_key_mass"].value(), mean_inverse(1, positions, eb), 1e-6);
  if (arm.sink == SinkKind::none) {
    EXPECT_FALSE(r["phantom_mass"].has_value());
  } else {
    double phantom = 0;
    for (int64_t i = 0; i < positions; ++i) phantom += eb / (eb + double(i + 1));
    EXPECT_NEAR(r["phantom_mass"].value(), phantom / double(positions), 1e-6);
  }
  if (arm.gate == GateKind::none) {
    EXPECT_FALSE(r["gate_mean"].has_value());
    EXPECT_FALSE(r["gate_closed_share"].has_value());
  } else {
    EXPECT_NEAR(r["gate_mean"].value(), 1.0, 1e-6);
    EXPECT_DOUBLE_EQ(r["gate_closed_share"].value(), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllArms, EveryArmProbe, ::testing::ValuesIn(testing_extra::registry_arm_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace attnlab
