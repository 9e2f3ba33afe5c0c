// Massive-activation statistics (SPEC section 5) on hand-made hidden states, the rank and set
// comparisons across checkpoints and seeds, and the capture from a tiny model against plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/activation_capture.h"
#include "attnlab/activation_stats.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "test_helpers.h"

namespace attnlab {
namespace {

using testing::from_vector;

TEST(ActivationStats, HandMadeStateGivesKnownValues) {
  // d = 6: |x| = {1, 2000, 3, 0.5, 2, 4}; sorted 0.5 1 2 3 4 2000 -> median (2 + 3) / 2 = 2.5
  const auto x = from_vector({1, -2000, 3, 0.5, -2, 4}, {6});
  const auto s = activation_stats(x, 4);
  EXPECT_EQ(s.max_abs, 2000.0);
  EXPECT_EQ(s.argmax, 1);
  ASSERT_EQ(s.top.size(), 4u);
  EXPECT_EQ(s.top[0].channel, 1);
  EXPECT_EQ(s.top[0].value, -2000.0);  // signed
  EXPECT_EQ(s.top[1].channel, 5);
  EXPECT_EQ(s.top[2].channel, 2);
  EXPECT_EQ(s.top[3].channel, 4);
  EXPECT_EQ(s.top[3].value, -2.0);
  EXPECT_EQ(s.median_abs, 2.5);
  EXPECT_EQ(s.ratio, 800.0);
  const double sum_sq = 1 + 2000.0 * 2000 + 9 + 0.25 + 4 + 16;
  EXPECT_DOUBLE_EQ(s.rms, std::sqrt(sum_sq / 6));
  EXPECT_DOUBLE_EQ(s.top3_share, (2000.0 * 2000 + 16 + 9) / sum_sq);
  EXPECT_FALSE(s.massive);  // ratio 800 < 1000
  EXPECT_TRUE(activation_stats(x, 4, {100.0, 800.0}).massive);
  EXPECT_FALSE(activation_stats(x, 4, {2000.0, 10.0}).massive);  // max must exceed min_max
}

TEST(ActivationStats, OddLengthMedianTiesAndSingleChannel) {
  const auto s = activation_stats(from_vector({3, -3, 1, 3, 2}, {5}), 3);
  EXPECT_EQ(s.median_abs, 3.0);
  EXPECT_EQ(s.argmax, 0);  // ties: lowest channel
  EXPECT_EQ(s.top[1].channel, 1);
  EXPECT_EQ(s.top[2].channel, 3);
  EXPECT_EQ(s.ratio, 1.0);
  const auto one = activation_stats(from_vector({-7}, {1}), 8);
  EXPECT_EQ(one.top.size(), 1u);  // top_k clamped to d_model
  EXPECT_EQ(one.median_abs, 7.0);
  EXPECT_EQ(one.rms, 7.0);
  EXPECT_EQ(one.top3_share, 1.0);
}

TEST(ActivationStats, ZeroMedianAndZeroState) {
  const auto s = activation_stats(from_vector({0, 0, 500, 0}, {4}));
  EXPECT_TRUE(std::isinf(s.ratio));
  EXPECT_TRUE(s.massive);
  const auto z = activation_stats(from_vector({0, 0, 0}, {3}));
  EXPECT_EQ(z.ratio, 0.0);
  EXPECT_EQ(z.top3_share, 0.0);
  EXPECT_FALSE(z.massive);
  // JSON round trip, +inf ratio as null
  const auto j = to_json(s);
  EXPECT_TRUE(j["ratio"].is_null());
  const auto back = activation_stats_from_json(j);
  EXPECT_TRUE(std::isinf(back.ratio));
  EXPECT_EQ(back.top[0].channel, 2);
}

TEST(ActivationStats, Float32InputAccumulatesInDouble) {
  // 4096 channels of 1e-3 plus one of 1e4: a float32 sum of squares loses the small ones entirely
  // (1 - top3_share would be 0 instead of 4.094e-11); float64 keeps them to ~1e-14.
  auto x = torch::full({4097}, 1e-3f, torch::kFloat);
  x[17] = 1e4f;
  const auto s = activation_stats(x);
  const double small = double(1e-3f);
  EXPECT_NEAR(s.rms, std::sqrt((1e8 + 4096 * small * small) / 4097), 1e-12 * s.rms);
  EXPECT_NEAR(1 - s.top3_share, 4094 * small * small / (1e8 + 4096 * small * small), 1e-12);
  EXPECT_GT(1 - s.top3_share, 4e-11);
}

TEST(ActivationStats, BadInputIsRefused) {
  EXPECT_THROW(activation_stats(torch::zeros({2, 3})), std::invalid_argument);
  EXPECT_THROW(activation_stats(torch::zeros({0})), std::invalid_argument);
  EXPECT_THROW(activation_stats(torch::zeros({3}), 0), std::invalid_argument);
}

TEST(ActivationStats, AverageRanksAndSpearmanWithTies) {
  EXPECT_EQ(average_ranks({10, 20, 20, 5}), (std::vector<double>{2, 3.5, 3.5, 1}));
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // ties: ranks a = {1, 2.5, 2.5, 4}, b = {1, 2, 3, 4}; centred: {-1.5, 0, 0, 1.5}, {-1.5, -.5, .5, 1.5}
  // sum ab = 4.5, sum aa = 4.5, sum bb = 5 -> 4.5 / sqrt(22.5)
  EXPECT_DOUBLE_EQ(spearman({1, 5, 5, 9}, {1, 2, 3, 4}), 4.5 / std::sqrt(22.5));
  EXPECT_TRUE(std::isnan(spearman({2, 2, 2}, {1, 2, 3})));
  EXPECT_THROW(spearman({1}, {1}), std::invalid_argument);
  EXPECT_THROW(spearman({1, 2}, {1, 2, 3}), std::invalid_argument);
}

TEST(ActivationStats, JaccardAndLockIn) {
  EXPECT_DOUBLE_EQ(jaccard({1, 2, 3}, {2, 3, 4, 5}), 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(jaccard({1, 1, 2}, {2, 1}), 1.0);
  EXPECT_DOUBLE_EQ(jaccard({}, {}), 1.0);
  EXPECT_DOUBLE_EQ(jaccard({1}, {}), 0.0);
  // the dominant channel settles on 7 at step 40 after visiting it earlier
  EXPECT_EQ(lock_in_step({1, 2, 10, 20, 40, 80}, {7, 3, 7, 3, 7, 7}), 40);
  EXPECT_EQ(lock_in_step({1, 2, 4}, {5, 5, 5}), 1);
  EXPECT_EQ(lock_in_step({1, 2, 4}, {5, 5, 6}), 4);
  EXPECT_EQ(lock_in_step({3}, {0}), 3);
  EXPECT_FALSE(lock_in_step({}, {}).has_value());
  EXPECT_THROW(lock_in_step({1, 2}, {1}), std::invalid_argument);
}

ModelConfig tiny(const std::string& arm) {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.block_size = 16, cfg.vocab_size = 50;
  return cfg;
}

TEST(ActivationCapture, MatchesPlainLoopsOverTheResidualStream) {
  GPT model(tiny("combo2"));
  init_parameters(*model, 3);
  const auto idx = torch::randint(50, {3, 8}, torch::TensorOptions().dtype(torch::kLong));
  std::vector<at::Tensor> seen;  // an independent hook keeps every layer's stream
  ForwardHooks hooks;
  hooks.on_residual = [&](int64_t, const at::Tensor& x) {
    seen.push_back(x.detach().to(torch::kDouble).clone());
    return x;
  };
  {
    torch::NoGradGuard no_grad;
    model->forward(idx, &hooks);
  }
  const auto capture = capture_activations(*model, idx, {4, {}, 2});
  ASSERT_EQ(capture.layers.size(), 3u);
  for (int64_t l = 0; l <= 2; ++l) {
    const auto& x = seen[l];  // [3, 8, 16]
    double best = -1;
    int64_t bs = 0, bt = 0;
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t t = 0; t < 8; ++t)
        for (int64_t c = 0; c < 16; ++c)
          if (std::abs(x[b][t][c].item<double>()) > best) best = std::abs(x[b][t][c].item<double>()), bs = b, bt = t;
    const auto& a = capture.layers[l];
    EXPECT_EQ(a.layer, l);
    EXPECT_EQ(a.peak_sequence, bs) << "layer " << l;
    EXPECT_EQ(a.peak_position, bt) << "layer " << l;
    EXPECT_NEAR(a.peak.max_abs, best, 1e-6 * best);
    double sink_max = 0;
    for (int64_t c = 0; c < 16; ++c) sink_max = std::max(sink_max, std::abs(x[0][0][c].item<double>()));
    EXPECT_NEAR(a.sink.max_abs, sink_max, 1e-6 * sink_max);
    EXPECT_EQ(a.sink_abs.size(), 16u);
  }
  // layer 0 is the embedding output: wte[token] + wpe[0]
  const auto emb = (model->wte->weight[idx[0][0].item<int64_t>()] + model->wpe->weight[0]).to(torch::kDouble);
  EXPECT_NEAR(capture.layers[0].sink.rms, emb.pow(2).mean().sqrt().item<double>(), 1e-6);
  ASSERT_TRUE(capture.tokens_abs.defined());
  EXPECT_EQ(capture.tokens_abs.sizes(), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(capture.tokens_layer, 2);
  EXPECT_EQ(capture.tokens_sequence, capture.layers[2].peak_sequence);
  EXPECT_THROW(capture_activations(*model, idx, {4, {}, 3}), std::invalid_argument);
  EXPECT_THROW(capture_activations(*model, torch::zeros({0, 4}, torch::kLong)), std::invalid_argument);
}

TEST(ActivationCapture, SinkTokenArmReportsTheLearnedToken) {
  GPT model(tiny("sink_token"));
  init_parameters(*model, 3);
  {
    torch::NoGradGuard no_grad;
    model->sink_token.copy_(torch::arange(16, torch::kFloat) - 4.0);  // |values| 4,3,2,1,0,1,...,11
  }
  const auto idx = torch::randint(50, {2, 5}, torch::TensorOptions().dtype(torch::kLong));
  const auto capture = capture_activations(*model, idx);
  const auto& s = capture.layers[0].sink;
  EXPECT_EQ(s.max_abs, 11.0);
  EXPECT_EQ(s.argmax, 15);
  EXPECT_EQ(s.median_abs, 4.0);  // sorted |x|: 0 1 1 2 2 3 3 4 | 4 5 6 7 8 9 10 11
  EXPECT_EQ(s.ratio, 11.0 / 4.0);
  // the prepended token is position 0 and outgrows the 0.02-scale text embeddings
  EXPECT_EQ(capture.layers[0].peak_position, 0);
  EXPECT_EQ(capture.layers[0].peak.max_abs, 11.0);
}

}  // namespace
}  // namespace attnlab
