// Sink-token ablation and the matched-rms ceiling (SPEC section 5): the edit touches exactly the
// chosen entries, scale:1 changes nothing bit for bit, the loss and the product rms * ||grad||
// match a forward pass written out by hand and finite differences in double, and bad specs fail.
#include <gtest/gtest.h>

#include <cmath>

#include <torch/torch.h>

#include "activation_models.h"
#include "attnlab/ablation.h"
#include "attnlab/channel_select.h"
#include "attnlab/rms_ceiling.h"

namespace attnlab {
namespace {

using testing::loss_by_hand;
using testing::random_batch;
using testing::tiny_gpt;

TEST(ChannelSelect, RmsAndTopChannelsWithTies) {
  const auto x = torch::tensor({3.0, -4.0, 4.0, 0.0}, torch::kDouble);
  EXPECT_DOUBLE_EQ(rms(x), std::sqrt((9.0 + 16 + 16) / 4));
  EXPECT_EQ(top_channels(x, 4), (std::vector<int64_t>{1, 2, 0, 3}));  // tie |-4| = |4|: lower index first
  EXPECT_TRUE(top_channels(x, 0).empty());
  EXPECT_THROW(top_channels(x, 5), std::invalid_argument);
  EXPECT_DOUBLE_EQ(rms(torch::tensor({-2.0}, torch::kDouble)), 2.0);  // d_model = 1
}

TEST(ChannelSelect, SpecsParseAndBadOnesNameTheCulprit) {
  EXPECT_EQ(parse_channel_spec("3,0,7", 8).channels, (std::vector<int64_t>{3, 0, 7}));
  EXPECT_EQ(parse_channel_spec("top:8", 8).k, 8);
  EXPECT_EQ(parse_channel_spec("random:7", 8).kind, ChannelSpec::Kind::random);
  for (const char* bad : {"", "8", "-1", "1,1", "1,,2", "x", "top:0", "top:9", "random:8", "bottom:2", "top:2x"}) {
    try {
      parse_channel_spec(bad, 8);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(ChannelSelect, RandomChannelsAreDistinctDeterministicAndSkipTheDominant) {
  const auto mag = torch::tensor({0.1, 9.0, 0.3, 0.2, 0.5}, torch::kDouble);
  const auto spec = parse_channel_spec("random:4", 5);
  const auto a = resolve_channels(spec, mag, 7);
  EXPECT_EQ(a, resolve_channels(spec, mag, 7));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 2, 3, 4}));  // every channel but the dominant 1
  EXPECT_EQ(resolve_channels(parse_channel_spec("top:2", 5), mag, 0), (std::vector<int64_t>{1, 4}));
}

TEST(AblateState, ZeroMeanAndScaleEditExactlyTheChosenEntries) {
  const auto x = torch::randn({2, 5, 8}, torch::kDouble);
  for (const char* text : {"zero", "mean", "scale:-2.5"}) {
    const auto mode = parse_ablation_mode(text);
    const auto out = ablate_state(x, 1, {3, 6}, mode);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 5; ++t)
        for (int64_t c = 0; c < 8; ++c) {
          const double v = x[b][t][c].item<double>(), o = out[b][t][c].item<double>();
          if (t != 1 || (c != 3 && c != 6)) {
            EXPECT_EQ(o, v) << text;  // untouched, bit for bit
            continue;
          }
          double expected = 0.0;
          if (mode.kind == AblationMode::Kind::scale) expected = -2.5 * v;
          if (mode.kind == AblationMode::Kind::mean) {
            for (int64_t s = 0; s < 5; ++s) expected += s == 1 ? 0.0 : x[b][s][c].item<double>() / 4.0;
          }
          EXPECT_NEAR(o, expected, 1e-12) << text;
        }
  }
  EXPECT_TRUE(torch::equal(ablate_state(x, 0, {}, parse_ablation_mode("zero")), x));  // empty selection
  EXPECT_THROW(ablate_state(x.narrow(1, 0, 1), 0, {1}, parse_ablation_mode("mean")), std::invalid_argument);  // T = 1
  EXPECT_THROW(ablate_state(x, 5, {1}, parse_ablation_mode("zero")), std::invalid_argument);
  EXPECT_THROW(ablate_state(x, 0, {8}, parse_ablation_mode("zero")), std::invalid_argument);
  for (const char* bad : {"scale", "scale:", "scale:x", "scale:nan", "half", "zero "})
    EXPECT_THROW(parse_ablation_mode(bad), std::invalid_argument) << bad;
}

AblationOptions options(int64_t layer, const std::string& channels, const std::string& mode) {
  AblationOptions o;
  o.layer = layer;
  o.channels = parse_channel_spec(channels, 16);
  o.mode = parse_ablation_mode(mode);
  return o;
}

class EveryAblatedArm : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryAblatedArm, ScaleOneChangesNothingBitForBit) {
  auto model = tiny_gpt(GetParam(), at::kFloat);
  const auto batch = random_batch(2, 7, 3);
  const auto r = ablate(*model, batch, options(1, "top:4", "scale:1"));
  EXPECT_EQ(r.ablated.loss, r.reference.loss);
  EXPECT_TRUE(torch::equal(r.ablated.grad, r.reference.grad));
  EXPECT_TRUE(torch::equal(r.ablated.state, r.reference.state));
  EXPECT_EQ(r.ablated.sink_attention, r.reference.sink_attention);
  EXPECT_EQ(r.ablated.product, r.reference.product);
}

TEST_P(EveryAblatedArm, ZeroingAChannelChangesExactlyThatChannelOfTheState) {
  auto model = tiny_gpt(GetParam(), at::kFloat);
  const auto r = ablate(*model, random_batch(2, 7, 4), options(2, "top:1", "zero"));
  ASSERT_EQ(r.channels.size(), 1u);
  const int64_t c = r.channels[0];
  auto diff = (r.ablated.state != r.reference.state);
  EXPECT_EQ(diff.sum().item<int64_t>(), 2);  // channel c of each of the 2 sequences
  EXPECT_TRUE(diff.select(1, c).all().item<bool>());
  EXPECT_TRUE((r.ablated.state.select(1, c) == 0).all().item<bool>());
  // Attention before the edited layer is the same; every layer's received mass is a probability.
  for (double a : r.ablated.sink_attention) {
    EXPECT_GE(a, 0.0);
    EXPECT_LE(a, 1.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Arms, EveryAblatedArm, ::testing::Values("baseline", "sink_token", "sink_logit", "combo2"));

TEST(Ablate, AttentionBeforeTheEditedLayerIsUntouched) {
  auto model = tiny_gpt("baseline", at::kFloat);
  const auto r = ablate(*model, random_batch(2, 7, 5), options(1, "top:3", "zero"));
  EXPECT_EQ(r.ablated.sink_attention[0], r.reference.sink_attention[0]);
  EXPECT_NE(r.ablated.sink_attention[1], r.reference.sink_attention[1]);
}

TEST(Ablate, LossAndProductMatchAHandForwardAndFiniteDifferences) {
  auto model = tiny_gpt("baseline", at::kDouble);
  const auto batch = random_batch(2, 6, 6);
  const int64_t layer = 1, B = 2, d = 16;
  const auto r = ablate(*model, batch, options(layer, "top:2", "zero"));
  const auto zero_channels = [&](at::Tensor x) {
    for (int64_t c : r.channels) x.select(1, 0).select(1, c).zero_();
    return x;
  };
  const auto identity = [](at::Tensor x) { return x; };
  EXPECT_NEAR(r.reference.loss, loss_by_hand(*model, batch, layer, identity), 1e-12);
  EXPECT_NEAR(r.ablated.loss, loss_by_hand(*model, batch, layer, zero_channels), 1e-12);

  // dL_b/dx_b by central differences of the batch-mean loss, times B (L = mean_b L_b).
  for (const auto* pass : {&r.reference, &r.ablated}) {
    const bool ablated = pass == &r.ablated;
    double product = 0.0, rms_mean = 0.0, grad_mean = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      double g2 = 0.0, x2 = 0.0;
      for (int64_t j = 0; j < d; ++j) {
        const double eps = 1e-6;
        auto moved = [&](double e) {
          return [&, e](at::Tensor x) {
            if (ablated) x = zero_channels(x);
            x[b][0][j] += e;
            return x;
          };
        };
        const double g = B * (loss_by_hand(*model, batch, layer, moved(eps)) -
                              loss_by_hand(*model, batch, layer, moved(-eps))) / (2 * eps);
        g2 += g * g;
        EXPECT_NEAR(pass->grad[b][j].item<double>(), g, 1e-6);
        const double xj = pass->state[b][j].item<double>();
        x2 += xj * xj;
      }
      rms_mean += std::sqrt(x2 / d) / B;
      grad_mean += std::sqrt(g2) / B;
      product += std::sqrt(x2 / d) * std::sqrt(g2) / B;
    }
    EXPECT_NEAR(pass->rms, rms_mean, 1e-12);
    EXPECT_NEAR(pass->grad_norm, grad_mean, 1e-6 * grad_mean);
    EXPECT_NEAR(pass->product, product, 1e-6 * product);
  }
}

TEST(Ablate, BadLayerPositionOrChannelIsRefusedBeforeAnyPass) {
  auto model = tiny_gpt("baseline", at::kFloat);
  const auto batch = random_batch(1, 4, 1);
  EXPECT_THROW(ablate(*model, batch, options(3, "1", "zero")), std::invalid_argument);
  EXPECT_THROW(ablate(*model, batch, options(-1, "1", "zero")), std::invalid_argument);
  auto o = options(1, "1", "zero");
  o.channels.channels = {16};
  EXPECT_THROW(ablate(*model, batch, o), std::invalid_argument);
  o = options(1, "1", "zero");
  o.position = 4;
  EXPECT_THROW(ablate(*model, batch, o), std::invalid_argument);
  EXPECT_THROW(ablate(*model, random_batch(1, 1, 1), options(1, "1", "mean")), std::invalid_argument);
}

TEST(RmsCeiling, MatchedRmsShiftAndRemovedShareMatchAHandComputation) {
  auto model = tiny_gpt("baseline", at::kDouble);
  const auto batch = random_batch(2, 6, 8);
  CeilingOptions o;
  o.layer = 1, o.shift = 0.2, o.top = 4, o.random_k = 3, o.seed = 1;
  const auto r = rms_ceiling(*model, batch, o);
  ASSERT_EQ(r.arms.size(), 3u);
  EXPECT_EQ(r.arms[0].channels.size(), 1u);
  EXPECT_EQ(r.arms[1].channels.size(), 4u);
  EXPECT_EQ(r.arms[0].channels[0], r.arms[1].channels[0]);
  for (int64_t c : r.arms[2].channels)  // random channels lie outside the top set
    EXPECT_EQ(std::count(r.arms[1].channels.begin(), r.arms[1].channels.end(), c), 0);

  torch::NoGradGuard no_grad;
  auto x = model->wte(batch.x) + model->wpe(torch::arange(6, torch::kLong));
  x = model->h[0]->as<Block>()->forward(x, 0);  // the state entering block 1
  const auto out = model->h[1]->as<Block>()->forward(x, 1);
  auto rms_of = [](const at::Tensor& v) { return v.pow(2).mean().sqrt().item<double>(); };
  for (const auto& arm : r.arms) {
    double removed = 0.0, excess = 0.0;
    for (int64_t b = 0; b < 2; ++b) {
      const auto xb = x[b][0];
      double in_set = 0.0;
      for (int64_t c : arm.channels) in_set += xb[c].item<double>() * xb[c].item<double>();
      const double r0 = rms_of(xb);
      const double g = std::sqrt(1.0 + 16 * r0 * r0 * (1.2 * 1.2 - 1.0) / in_set);
      auto edited = x.clone();
      for (int64_t c : arm.channels) edited[b][0][c] *= g;
      EXPECT_NEAR(rms_of(edited[b][0]), 1.2 * r0, 1e-12);  // matched rms shift
      const auto out2 = model->h[1]->as<Block>()->forward(edited, 1);
      const double e = rms_of(edited[b][0]) - r0;
      excess += e / 2;
      removed += (1.0 - (rms_of(out2[b][0]) - rms_of(out[b][0])) / e) / 2;
    }
    EXPECT_NEAR(arm.excess, excess, 1e-12) << arm.name;
    EXPECT_NEAR(arm.removed_share, removed, 1e-9) << arm.name;
  }
}

TEST(RmsCeiling, BadOptionsAreRefused) {
  auto model = tiny_gpt("baseline", at::kFloat);
  const auto batch = random_batch(1, 4, 1);
  CeilingOptions o;
  o.top = 4, o.random_k = 4;
  o.layer = 2;  // n_layer: no block after it
  EXPECT_THROW(rms_ceiling(*model, batch, o), std::invalid_argument);
  o.layer = 0, o.shift = 0.0;
  EXPECT_THROW(rms_ceiling(*model, batch, o), std::invalid_argument);
  o.shift = 0.1, o.top = 17;
  EXPECT_THROW(rms_ceiling(*model, batch, o), std::invalid_argument);
  o.top = 10, o.random_k = 7;
  EXPECT_THROW(rms_ceiling(*model, batch, o), std::invalid_argument);
}

}  // namespace
}  // namespace attnlab
