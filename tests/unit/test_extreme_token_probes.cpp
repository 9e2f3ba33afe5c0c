// The extreme-token probes (Guo et al. 2024: value-state drain, residual-state peak, trigger and
// other first-key masses), the chance level of every first-key mass, and Bondarenko et al.'s outlier
// statistics, each against plain loops with explicit norms, sorts and medians, on hand-made tensors
// and through a tiny model. Medians of an even count are the mean of the two middle values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/outlier_stats.h"
#include "attnlab/probe_measures.h"
#include "attnlab/probe_result.h"
#include "attnlab/probe_run.h"
#include "attnlab/probes.h"

namespace attnlab {
namespace {

// The median by sorting: the middle value, or the mean of the two middle values of an even count.
double sorted_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double euclid(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// Kurtosis written out: mean((x - mu)^4) / (s^4 + 1e-6), s^2 = sum (x - mu)^2 / (n - 1).
double loop_kurtosis(const std::vector<double>& x) {
  double mu = 0, m4 = 0, ss = 0;
  for (double v : x) mu += v;
  mu /= double(x.size());
  for (double v : x) m4 += std::pow(v - mu, 4), ss += (v - mu) * (v - mu);
  const double var = ss / double(x.size() - 1);
  return (m4 / double(x.size())) / (var * var + 1e-6);
}

std::vector<double> values_of(const at::Tensor& t) {
  auto c = t.detach().to(at::kDouble).contiguous().reshape({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Uniform attention over each query's window (W = 0: no window): [1, H, T, T] with 1 / |V(i)|.
at::Tensor uniform_probs(int64_t H, int64_t T, int64_t W = 0, int64_t n = 0) {
  auto p = torch::zeros({1, H, T, T}, torch::kDouble);
  auto a = p.accessor<double, 4>();
  for (int64_t i = 0; i < T; ++i) {
    auto sees = [&](int64_t j) { return W == 0 || i - j < W || j < n; };
    int64_t seen = 0;
    for (int64_t j = 0; j <= i; ++j) seen += sees(j);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j <= i; ++j)
        if (sees(j)) a[0][h][i][j] = 1.0 / double(seen);
  }
  return p;
}

TEST(OutlierStats, KurtosisOfASmallVectorEqualsTheHandValue) {
  // x = 1, 2, 3, 4: mu 2.5, mean (x - mu)^4 = (2 * 1.5^4 + 2 * 0.5^4) / 4 = 2.5625, unbiased
  // variance 5 / 3, so std^4 = 25 / 9.
  const auto s = outlier_stats(torch::tensor({1.0, 2.0, 3.0, 4.0}).view({2, 2}));
  EXPECT_DOUBLE_EQ(s.inf_norm, 4.0);
  EXPECT_NEAR(s.kurtosis, 2.5625 / (25.0 / 9.0 + 1e-6), 1e-14);
  EXPECT_DOUBLE_EQ(outlier_stats(torch::tensor({-5.0, 1.0})).inf_norm, 5.0);  // |x|, not x
  EXPECT_DOUBLE_EQ(outlier_stats(torch::full({3, 4}, 2.0)).kurtosis, 0.0);    // 0 / 1e-6, not NaN
  EXPECT_TRUE(std::isnan(outlier_stats(torch::ones({1})).kurtosis));           // one value: no unbiased std
  EXPECT_THROW(outlier_stats(torch::ones({0})), std::invalid_argument);
}

TEST(OutlierStats, GaussianValuesHaveKurtosisThreeAndRandomOnesMatchALoop) {
  torch::manual_seed(11);
  EXPECT_NEAR(outlier_stats(torch::randn({400, 500}, torch::kDouble)).kurtosis, 3.0, 0.05);
  const auto x = torch::randn({7, 5}) * 3 + 1;
  const auto v = values_of(x);
  double inf = 0;
  for (double e : v) inf = std::max(inf, std::fabs(e));
  const auto s = outlier_stats(x);
  EXPECT_NEAR(s.inf_norm, inf, 1e-6);
  EXPECT_NEAR(s.kurtosis, loop_kurtosis(v), 1e-10);
}

TEST(ValueDrain, SinkReadOverTheMedianOfAllPositionsEvenCount) {
  // Norms 2, 4, 1, 8: the median of all four (position 0 included) is (2 + 4) / 2 = 3; the read-norm
  // ratio's median over positions 1..3 is 4.
  auto norms = torch::tensor({2.0, 4.0, 1.0, 8.0}, torch::kDouble).view({1, 1, 4});
  LayerProbeSums sums(1);
  accumulate_layer({uniform_probs(1, 4), norms, {}, {}}, sums);
  EXPECT_NEAR(sums.value_drain.mean(0), 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(sums.read_norm_ratio.mean(0), 2.0 / 4.0, 1e-15);
  LayerProbeSums zero(1);  // a zero median is skipped: nothing averaged
  accumulate_layer({uniform_probs(1, 4), torch::tensor({1.0, 0.0, 0.0, 0.0}).view({1, 1, 4}), {}, {}}, zero);
  EXPECT_TRUE(std::isnan(zero.value_drain.mean(0)));
}

TEST(ValueDrain, RandomNormsMatchAPlainLoop) {
  torch::manual_seed(12);
  const int64_t B = 3, H = 2;
  for (int64_t T : {5, 6}) {  // odd and even counts
    auto norms = torch::rand({B, H, T}) * 2;
    LayerProbeSums sums(H);
    accumulate_layer({uniform_probs(1, T).expand({B, H, T, T}), norms, {}, {}}, sums);
    for (int64_t h = 0; h < H; ++h) {
      double sum = 0;
      for (int64_t b = 0; b < B; ++b) {
        const auto row = values_of(norms[b][h]);
        sum += row[0] / sorted_median(row);
      }
      EXPECT_NEAR(sums.value_drain.mean(h), sum / double(B), 1e-12) << "T " << T;
    }
  }
}

TEST(ResidualStats, PeakInfNormAndKurtosisMatchAPlainLoop) {
  torch::manual_seed(13);
  const int64_t B = 3, T = 6, d = 4;  // even T: the median of the norms is the mean of the middle two
  auto x = torch::randn({B, T, d});
  x.select(1, 0).mul_(10);  // a peak at position 0
  LayerProbeSums sums(2);
  accumulate_residual(x.narrow(0, 0, 2), sums);
  accumulate_residual(x.narrow(0, 2, 1), sums);
  double peak = 0, inf = 0, kurt = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> norms;
    for (int64_t t = 0; t < T; ++t) norms.push_back(euclid(values_of(x[b][t])));
    peak += norms[0] / sorted_median(norms);
    double m = 0;
    for (double v : values_of(x[b])) m = std::max(m, std::fabs(v));
    inf += m;
    kurt += loop_kurtosis(values_of(x[b]));
  }
  EXPECT_NEAR(sums.residual_peak.mean(0), peak / double(B), 1e-10);
  EXPECT_NEAR(sums.inf_norm.mean(0), inf / double(B), 1e-6);
  EXPECT_NEAR(sums.kurtosis.mean(0), kurt / double(B), 1e-10);
  EXPECT_GT(sums.residual_peak.mean(0), 3.0);
  EXPECT_THROW(accumulate_residual(torch::ones({2, 3}), sums), std::invalid_argument);
}

TEST(ChanceLevel, UniformAttentionPutsExactlyItsChanceOnKeyZero) {
  const int64_t H = 2, T = 9;
  struct Case {
    int64_t W, n;
  };
  for (const Case c : {Case{0, 0}, Case{3, 0}, Case{3, 1}, Case{4, 2}}) {
    const AttentionWindow window = c.W ? AttentionWindow{c.W, c.n} : AttentionWindow{};
    LayerProbeSums sums(H);
    LayerProbeInputs in{uniform_probs(H, T, c.W, c.n), torch::rand({1, H, T}) + 1, {}, {}, {}, window};
    accumulate_layer(in, sums);
    // The chance written out: queries i >= 1 that see key 0, each 1 / (number of keys it sees).
    double first = 0, oldest = 0;
    int64_t n_first = 0, n_oldest = 0;
    for (int64_t i = 0; i < T; ++i) {
      int64_t seen = 0;
      for (int64_t j = 0; j <= i; ++j) seen += c.W == 0 || i - j < c.W || j < c.n;
      const bool sees_0 = c.W == 0 || i < c.W || c.n >= 1;
      if (i >= 1 && sees_0) first += 1.0 / double(seen), ++n_first;
      if (seen >= 2) oldest += 1.0 / double(seen), ++n_oldest;
    }
    for (int64_t h = 0; h < H; ++h) {
      EXPECT_NEAR(sums.first_key_chance.mean(h), first / double(n_first), 1e-15) << c.W << " " << c.n;
      EXPECT_NEAR(sums.first_key_mass.mean(h), sums.first_key_chance.mean(h), 1e-15);
      EXPECT_NEAR(sums.oldest_key_chance.mean(h), oldest / double(n_oldest), 1e-15);
      EXPECT_NEAR(sums.oldest_key_mass.mean(h), sums.oldest_key_chance.mean(h), 1e-15);
    }
  }
  // T = 50 without a window: the chance of the harmonic mean kind, sum_{i=1}^{49} 1 / (i + 1) / 49.
  LayerProbeSums global(1);
  accumulate_layer({uniform_probs(1, 50), torch::ones({1, 1, 50}), {}, {}}, global);
  double h50 = 0;
  for (int i = 2; i <= 50; ++i) h50 += 1.0 / i;
  EXPECT_NEAR(global.first_key_chance.mean(0), h50 / 49.0, 1e-15);
}

TEST(TriggerMasses, TriggerAndOtherQueriesOfAHandMadeAttention) {
  torch::manual_seed(14);
  const int64_t B = 2, H = 3, T = 8;
  auto s = torch::randn({B, H, T, T});
  auto probs = torch::softmax(s.masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -INFINITY), -1);
  const auto idx = torch::tensor({5, 3, 9, 7, 3, 1, 2, 7, 3, 3, 0, 0, 11, 4, 7, 8}, torch::kLong).view({B, T});
  const std::vector<int64_t> tokens = {3, 7};
  LayerProbeInputs in{probs, torch::rand({B, H, T}) + 1, {}, {}, {}, {}};
  in.trigger = trigger_queries(idx, tokens, false);
  LayerProbeSums sums(H);
  accumulate_layer(in, sums);
  const auto P = probs.to(torch::kDouble);
  for (int64_t h = 0; h < H; ++h) {
    double trig = 0, other = 0, trig_chance = 0, other_chance = 0;
    int64_t n_trig = 0, n_other = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 1; i < T; ++i) {  // query 0 excluded, as in first_key_mass
        const int64_t token = idx[b][i].item<int64_t>();
        const double a = P[b][h][i][0].item<double>(), chance = 1.0 / double(i + 1);
        if (token == 3 || token == 7) trig += a, trig_chance += chance, ++n_trig;
        else other += a, other_chance += chance, ++n_other;
      }
    EXPECT_NEAR(sums.trigger_key_mass.mean(h), trig / double(n_trig), 1e-12);
    EXPECT_NEAR(sums.other_key_mass.mean(h), other / double(n_other), 1e-12);
    EXPECT_NEAR(sums.trigger_key_chance.mean(h), trig_chance / double(n_trig), 1e-15);
    EXPECT_NEAR(sums.other_key_chance.mean(h), other_chance / double(n_other), 1e-15);
  }
  // Without trigger tokens nothing is added: the summary says none (not NaN), the chance of the
  // other masses included.
  LayerProbeSums plain(H);
  accumulate_layer({probs, torch::rand({B, H, T}) + 1, {}, {}}, plain);
  const auto summary = probe_summary({plain}, ProbeFeatures{});
  EXPECT_FALSE(summary.model["trigger_key_mass"].has_value());
  EXPECT_FALSE(summary.layers[0].head_values("other_key_chance")[0].has_value());
  ProbeFeatures with;
  with.triggers = true;  // given, but no query carries one: NaN
  EXPECT_TRUE(std::isnan(probe_summary({plain}, with).model["trigger_key_mass"].value()));
}

TEST(TriggerMasses, SinkTokenShiftsTheTriggersByTheLearnedToken) {
  const auto idx = torch::tensor({3, 1, 7}, torch::kLong).view({1, 3});
  EXPECT_TRUE(torch::equal(trigger_queries(idx, {3, 7}, false), torch::tensor({true, false, true}).view({1, 3})));
  EXPECT_TRUE(torch::equal(trigger_queries(idx, {3, 7}, true), torch::tensor({false, true, false, true}).view({1, 4})));
  EXPECT_FALSE(trigger_queries(idx, {}, false).any().item<bool>());
  EXPECT_THROW(trigger_queries(torch::ones({3}, torch::kLong), {3}, false), std::invalid_argument);
}

// A tiny model, its init seeded; `zero_queries` makes every score 0, so attention is uniform.
GPT tiny_model(const std::string& arm, bool zero_queries) {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.block_size = 16, cfg.vocab_size = 50;
  GPT model(cfg);
  init_parameters(*model, 9);
  torch::NoGradGuard no_grad;
  if (zero_queries)
    for (const auto& block : *model->h) {
      auto attn = block->as<Block>()->attn;
      attn->c_attn->weight.narrow(0, 0, cfg.d_model).zero_();
      attn->c_attn->bias.narrow(0, 0, cfg.d_model).zero_();
    }
  return model;
}

std::vector<Batch> batches_of(const at::Tensor& idx) { return {{idx, idx}}; }

// Through the model: layer 0's value drain from the values computed by hand (embedding, ln_1, the
// value third of c_attn), and every layer's residual statistics from the stream after each block.
TEST(ExtremeTokenProbe, TinyModelMatchesPlainLoops) {
  torch::manual_seed(15);
  const int64_t B = 2, T = 8, H = 2, d = 16, hd = d / H;
  auto model = tiny_model("baseline", false);
  const auto idx = torch::randint(0, 50, {B, T}, torch::kLong);
  const auto r = probe_model(*model, batches_of(idx), torch::kCPU);

  torch::NoGradGuard no_grad;
  auto block0 = model->h[0]->as<Block>();
  const auto x0 = model->wte(idx) + model->wpe(torch::arange(T, torch::kLong));
  const auto a = at::layer_norm(x0, {d}, block0->ln_1->weight, block0->ln_1->bias, 1e-5);
  const auto v = at::linear(a, block0->attn->c_attn->weight, block0->attn->c_attn->bias).narrow(2, 2 * d, d);
  for (int64_t h = 0; h < H; ++h) {
    double drain = 0;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> norms;
      for (int64_t t = 0; t < T; ++t) norms.push_back(euclid(values_of(v[b][t].narrow(0, h * hd, hd))));
      drain += norms[0] / sorted_median(norms);
    }
    EXPECT_NEAR(r.layers[0].head_values("value_drain")[size_t(h)].value(), drain / double(B), 1e-5);
  }

  std::map<int64_t, at::Tensor> stream;  // after block l: hook layer l + 1
  ForwardHooks hooks;
  hooks.on_residual = [&](int64_t l, const at::Tensor& x) {
    stream[l] = x.clone();
    return x;
  };
  model->forward(idx, &hooks);
  double max_inf = 0, kurt_sum = 0, kurt_max = 0;
  for (int64_t l = 0; l < 2; ++l) {
    double peak = 0, inf = 0, kurt = 0;
    for (int64_t b = 0; b < B; ++b) {
      const auto h = stream.at(l + 1)[b];
      std::vector<double> norms;
      for (int64_t t = 0; t < T; ++t) norms.push_back(euclid(values_of(h[t])));
      peak += norms[0] / sorted_median(norms);
      double m = 0;
      for (double e : values_of(h)) m = std::max(m, std::fabs(e));
      inf += m;
      kurt += loop_kurtosis(values_of(h));
    }
    const auto& layer = r.layers[size_t(l)].mean;
    EXPECT_NEAR(layer["residual_peak"].value(), peak / B, 1e-5) << l;
    EXPECT_NEAR(layer["inf_norm"].value(), inf / B, 1e-5) << l;
    EXPECT_NEAR(layer["kurtosis"].value(), kurt / B, 1e-5) << l;
    EXPECT_FALSE(layer["max_kurtosis"].has_value()) << "model only";
    max_inf = std::max(max_inf, inf / B), kurt_sum += kurt / B, kurt_max = std::max(kurt_max, kurt / B);
  }
  EXPECT_NEAR(r.model["max_inf_norm"].value(), max_inf, 1e-5);
  EXPECT_NEAR(r.model["kurtosis"].value(), kurt_sum / 2, 1e-5);
  EXPECT_NEAR(r.model["max_kurtosis"].value(), kurt_max, 1e-5);
  EXPECT_NO_THROW(check_probe_summary(r, probe_features(model->config()), 2, 2));
}

// Uniform attention through the model: each trigger / other mass is its chance, the mean over those
// queries of 1 / (position + 1); sink_token's learned token shifts the text by one position.
TEST(ExtremeTokenProbe, TriggerMassesThroughTheModelAreTheirChanceUnderUniformAttention) {
  const int64_t B = 2, T = 7;
  const auto idx = torch::tensor({3, 5, 7, 3, 1, 2, 9, 8, 7, 7, 0, 3, 4, 6}, torch::kLong).view({B, T});
  for (const std::string arm : {"baseline", "sink_token"}) {
    const int64_t shift = arm == "sink_token" ? 1 : 0;
    const auto r = probe_model(*tiny_model(arm, true), batches_of(idx), torch::kCPU, nullptr, {3, 7}).model;
    double trig = 0, other = 0;
    int64_t n_trig = 0, n_other = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t i = t + shift;  // the model's position
        if (i == 0) continue;
        const int64_t token = idx[b][t].item<int64_t>();
        if (token == 3 || token == 7) trig += 1.0 / double(i + 1), ++n_trig;
        else other += 1.0 / double(i + 1), ++n_other;
      }
    EXPECT_NEAR(r["trigger_key_mass"].value(), trig / double(n_trig), 1e-6) << arm;
    EXPECT_NEAR(r["trigger_key_chance"].value(), trig / double(n_trig), 1e-15) << arm;
    EXPECT_NEAR(r["other_key_mass"].value(), other / double(n_other), 1e-6) << arm;
    EXPECT_NEAR(r["other_key_chance"].value(), other / double(n_other), 1e-15) << arm;
  }
}

// probe.json: the new keys where the documented shape puts them; the trigger tokens travel with the
// file and its cache key; a file from before the measures reads back, but the check refuses it.
TEST(ExtremeTokenProbe, JsonRoundTripAndFilesFromBeforeTheMeasures) {
  torch::manual_seed(16);
  auto model = tiny_model("baseline", false);
  ProbeFeatures f = probe_features(model->config());
  f.triggers = true;
  ProbeResult p;
  p.provenance.arm = "baseline", p.provenance.checkpoint = "c", p.provenance.data = "d";
  p.summary = probe_model(*model, batches_of(torch::randint(0, 50, {2, 6}, torch::kLong)), torch::kCPU, nullptr, {3});
  p.sink_state = SinkStateRatio{2.0, 1};
  p.trigger_tokens = {3};
  const auto j = nlohmann::json::parse(to_json(p).dump());
  EXPECT_EQ(j["trigger_tokens"], nlohmann::json::parse("[3]"));
  EXPECT_TRUE(j["summary"]["layers"][0].contains("residual_peak"));
  EXPECT_TRUE(j["summary"]["layers"][0]["heads"].contains("value_drain"));
  EXPECT_FALSE(j["summary"]["layers"][0].contains("max_kurtosis"));
  EXPECT_TRUE(j["summary"]["model"].contains("max_kurtosis"));
  const auto back = probe_result_from_json(j);
  EXPECT_EQ(back.trigger_tokens, p.trigger_tokens);
  EXPECT_NO_THROW(check_probe_summary(back.summary, f, 2, 2));
  EXPECT_DOUBLE_EQ(back.summary.model["max_kurtosis"].value(), p.summary.model["max_kurtosis"].value());
  EXPECT_EQ(result_key(back)["trigger_tokens"], nlohmann::json::parse("[3]"));
  EXPECT_FALSE(result_key(back.provenance, std::vector<int64_t>{}).contains("trigger_tokens")) << "the key of before trigger tokens";

  auto old = j;  // as written before the extreme-token measures
  old.erase("trigger_tokens");
  for (const auto& m : probe_measure_table()) {
    if (!m.may_lack || m.needs == ProbeMeasure::Needs::out_gate) continue;
    old["summary"]["model"].erase(m.name);
    for (auto& layer : old["summary"]["layers"]) {
      layer["heads"].erase(m.name);
      layer["mean"].erase(m.name);
      layer.erase(m.name);
    }
  }
  const auto legacy = probe_result_from_json(old);
  EXPECT_FALSE(legacy.summary.model["value_drain"].has_value());
  try {
    check_probe_summary(legacy.summary, probe_features(model->config()), 2, 2);
    FAIL() << "a file without the new measures was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("written before the measure"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnlab
