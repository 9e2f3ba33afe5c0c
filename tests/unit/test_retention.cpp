// Writer-row retention (SPEC section 5): G against finite differences of the loss along the row
// (no autograd), G_pre against a hand-built AdamW state and a plain loop, the top-k selection
// against a forward pass written out by hand, and clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include <torch/torch.h>

#include "activation_models.h"
#include "attnlab/writer_retention.h"

namespace attnlab {
namespace {

using testing::random_batch;
using testing::tiny_gpt;

// Mean loss over the batches with the parameter `name`'s row c moved by eps times itself.
double loss_along_row(GPTImpl& m, const std::vector<Batch>& batches, const std::string& name, int64_t c, double eps) {
  torch::NoGradGuard no_grad;
  auto p = m.named_parameters()[name];
  const auto saved = p.clone();
  p[c].mul_(1.0 + eps);
  double sum = 0.0;
  for (const auto& b : batches) sum += lm_loss(m.forward(b.x), b.y).item<double>();
  p.copy_(saved);
  return sum / double(batches.size());
}

TEST(Retention, RawRetentionMatchesFiniteDifferencesAlongTheRow) {
  auto model = tiny_gpt("baseline", at::kDouble);
  testing::jitter_biases(*model, 3);
  const std::vector<Batch> batches = {random_batch(2, 6, 1), random_batch(2, 6, 2)};
  RetentionOptions o;
  o.weight_decay = 0.1;
  const auto r = writer_retention(*model, batches, nullptr, o);
  ASSERT_EQ(r.weights.size(), 2u * 2u * 16u);  // layers 1..2 x {attn, mlp} x every channel
  ASSERT_EQ(r.biases.size(), r.weights.size());
  EXPECT_FALSE(r.optimizer_step.has_value());
  for (const auto* rows : {&r.weights, &r.biases}) {
    for (const auto& row : *rows) {
      // d/de L(w + e w) at e = 0 is <grad_w, w>, so G = -that / ||w||^2. The step moves w by 1e-5
      // in absolute terms, so small bias entries are not lost to round-off.
      const double eps = 1e-5 / row.norm;
      const double slope = (loss_along_row(*model, batches, row.param, row.channel, eps) -
                            loss_along_row(*model, batches, row.param, row.channel, -eps)) / (2 * eps);
      const double expected = -slope / (row.norm * row.norm);
      EXPECT_NEAR(row.G, expected, 1e-6 * std::max(1.0, std::abs(expected))) << row.param << " channel " << row.channel;
      EXPECT_FALSE(row.G_pre.has_value());
      EXPECT_EQ(row.weight_decay, rows == &r.weights ? 0.1 : 0.0) << row.param;
    }
  }
  // The writers of residual layer L are block L-1's.
  EXPECT_EQ(r.weights.front().param, "h.0.attn.c_proj.weight");
  EXPECT_EQ(r.weights.back().param, "h.1.mlp.c_proj.weight");
}

TEST(Retention, TopKChannelsAreTheLargestAtTheSinkByAHandForwardPass) {
  auto model = tiny_gpt("baseline", at::kDouble);
  const std::vector<Batch> batches = {random_batch(3, 6, 4)};
  RetentionOptions o;
  o.layers = {2};
  o.top_k = 3;
  const auto r = writer_retention(*model, batches, nullptr, o);
  // |x_c| at position 0 after block 1, mean over the 3 sequences, by hand.
  torch::NoGradGuard no_grad;
  auto x = model->wte(batches[0].x) + model->wpe(torch::arange(6, torch::kLong));
  for (int64_t l = 0; l < 2; ++l) x = model->h[l]->as<Block>()->forward(x, l);
  const auto mag = x.select(1, 0).abs().mean(0);
  std::vector<std::pair<double, int64_t>> order;
  for (int64_t c = 0; c < 16; ++c) order.push_back({-mag[c].item<double>(), c});
  std::sort(order.begin(), order.end());
  ASSERT_EQ(r.weights.size(), 6u);  // {attn, mlp} x 3
  for (size_t i = 0; i < r.weights.size(); ++i) {
    const auto& row = r.weights[i];
    EXPECT_EQ(row.layer, 2);
    EXPECT_EQ(row.rank, int64_t(i % 3));
    EXPECT_EQ(row.channel, order[i % 3].second);
    EXPECT_NEAR(row.sink_abs_x, -order[i % 3].first, 1e-12);
  }
}

TEST(Retention, PreconditionedRetentionMatchesAHandBuiltAdamWStateInAPlainLoop) {
  auto model = tiny_gpt("baseline", at::kDouble);
  testing::jitter_biases(*model, 4);
  const std::vector<Batch> batches = {random_batch(2, 5, 9)};
  LoadedCheckpoint ckpt;
  auto gen = at::detail::createCPUGenerator(11);
  nlohmann::json decayed = nlohmann::json::array(), plain = nlohmann::json::array();
  for (const auto& item : model->named_parameters()) {
    const auto& name = item.key();
    if (name.find("c_proj") == std::string::npos) continue;
    (name.find("weight") != std::string::npos ? decayed : plain).push_back(name);
    if (name == "h.1.mlp.c_proj.bias") continue;  // never stepped: no G_pre
    ckpt.optimizer["exp_avg." + name] = at::randn(item.value().sizes(), gen, torch::kFloat) * 1e-3;
    ckpt.optimizer["exp_avg_sq." + name] = at::rand(item.value().sizes(), gen, torch::kFloat) * 1e-6;
    ckpt.optimizer["step." + name] = at::scalar_tensor(7, torch::kLong);
  }
  ckpt.optimizer_groups = {{{"params", decayed}, {"lr", 1e-3}, {"betas", {0.9, 0.95}}, {"eps", 1e-8}, {"weight_decay", 0.03}, {"amsgrad", false}},
                           {{"params", plain}, {"lr", 1e-3}, {"betas", {0.8, 0.99}}, {"eps", 1e-6}, {"weight_decay", 0.0}, {"amsgrad", false}}};
  RetentionOptions o;
  o.weight_decay = 0.5;  // the optimizer state's lambda wins
  const auto r = writer_retention(*model, batches, &ckpt, o);
  EXPECT_EQ(r.optimizer_step, 7);
  for (const auto* rows : {&r.weights, &r.biases}) {
    for (const auto& row : *rows) {
      const bool is_weight = rows == &r.weights;
      EXPECT_EQ(row.weight_decay, is_weight ? 0.03 : 0.0);
      if (row.param == "h.1.mlp.c_proj.bias") {
        EXPECT_FALSE(row.G_pre.has_value());
        continue;
      }
      ASSERT_TRUE(row.G_pre.has_value()) << row.param;
      const double b1 = is_weight ? 0.9 : 0.8, b2 = is_weight ? 0.95 : 0.99, eps = is_weight ? 1e-8 : 1e-6;
      const auto w = model->named_parameters()[row.param].detach()[row.channel].reshape({-1});
      const auto m = ckpt.optimizer.at("exp_avg." + row.param)[row.channel].reshape({-1});
      const auto v = ckpt.optimizer.at("exp_avg_sq." + row.param)[row.channel].reshape({-1});
      double dot = 0.0, ww = 0.0;
      for (int64_t j = 0; j < w.numel(); ++j) {
        const double mj = double(m[j].item<float>()) / (1.0 - std::pow(b1, 7.0));
        const double vj = double(v[j].item<float>()) / (1.0 - std::pow(b2, 7.0));
        dot += w[j].item<double>() * mj / (std::sqrt(vj) + eps);
        ww += w[j].item<double>() * w[j].item<double>();
      }
      EXPECT_NEAR(*row.G_pre, -dot / ww, 1e-9 * std::max(1.0, std::abs(dot / ww))) << row.param << " " << row.channel;
    }
  }
}

TEST(Retention, AZeroRowHasNoRetention) {
  auto model = tiny_gpt("baseline", at::kDouble);  // biases start at zero
  RetentionOptions o;
  o.layers = {1};
  const auto r = writer_retention(*model, {random_batch(1, 4, 1)}, nullptr, o);
  for (const auto& row : r.biases) {
    EXPECT_EQ(row.norm, 0.0);
    EXPECT_TRUE(std::isnan(row.G));
  }
}

TEST(Retention, BadInputIsRefusedNamingTheCulprit) {
  auto model = tiny_gpt("baseline", at::kFloat);
  const std::vector<Batch> batches = {random_batch(1, 4, 1)};
  RetentionOptions o;
  EXPECT_THROW(writer_retention(*model, {}, nullptr, o), std::invalid_argument);
  o.layers = {0};
  EXPECT_THROW(writer_retention(*model, batches, nullptr, o), std::invalid_argument);
  o.layers = {3};
  EXPECT_THROW(writer_retention(*model, batches, nullptr, o), std::invalid_argument);
  o.layers = {};
  o.top_k = 17;
  EXPECT_THROW(writer_retention(*model, batches, nullptr, o), std::invalid_argument);
  o.top_k = 0;
  o.position = 4;
  EXPECT_THROW(writer_retention(*model, batches, nullptr, o), std::invalid_argument);
}

// G_pre is AdamW's: a checkpoint of sgd or muon is refused naming the optimizer (docs/retention.md).
TEST(Retention, OtherOptimizersStateIsRefusedNamingTheOptimizer) {
  auto model = tiny_gpt("baseline", at::kFloat);
  const std::vector<Batch> batches = {random_batch(1, 4, 1)};
  for (const auto name : {OptimizerName::sgd, OptimizerName::muon}) {
    LoadedCheckpoint ckpt;
    ckpt.dir = "runs/x/checkpoints/step_000002";
    ckpt.optimizer_name = name;
    ckpt.optimizer_groups = {{{"params", nlohmann::json::array()}, {"lr", 0.1}, {"momentum", 0.9}}};
    try {
      writer_retention(*model, batches, &ckpt, {});
      ADD_FAILURE() << "retention of an " << to_string(name) << " checkpoint";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("trained with optimizer " + to_string(name) + " (optim.name)"),
                std::string::npos) << e.what();
    }
  }
}

TEST(Retention, SinkTokenArmRanksChannelsAtTheLearnedToken) {
  // Position 0 is the learned token: its state after block 1 is the same for every sequence, so
  // the mean |x_c| equals one sequence's.
  auto model = tiny_gpt("sink_token", at::kDouble);
  {
    torch::NoGradGuard g;
    model->sink_token.copy_(torch::linspace(-1, 1, 16, torch::kDouble));
  }
  RetentionOptions o;
  o.layers = {1};
  o.top_k = 2;
  const auto a = writer_retention(*model, {random_batch(2, 4, 1)}, nullptr, o);
  const auto b = writer_retention(*model, {random_batch(3, 4, 2)}, nullptr, o);
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    EXPECT_EQ(a.weights[i].channel, b.weights[i].channel);
    EXPECT_NEAR(a.weights[i].sink_abs_x, b.weights[i].sink_abs_x, 1e-12);
  }
}

}  // namespace
}  // namespace attnlab
