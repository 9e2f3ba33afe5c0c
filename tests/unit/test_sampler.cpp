// `attnlab sample`'s decoding: KV-cache generation equals greedy decoding by full forward passes for
// every arm (also past block_size, where the context restarts), the sampling rule against hand-made
// logits, and the same text for the same seed.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include <torch/torch.h>

#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/sampler.h"
#include "extra_arm.h"

namespace attnlab {
namespace {

GPT model_for(const std::string& arm, int64_t block_size = 16) {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.block_size = block_size, cfg.vocab_size = 50;
  GPT model(cfg);
  init_parameters(*model, 7);
  model->to(at::kDouble);
  // Large random weights everywhere (GPT-2's N(0, 0.02) makes an untrained model repeat one token
  // whatever the context), with the gates and sink logits away from their init, so that the next
  // token depends on the whole cached context.
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  for (auto& p : model->parameters()) p.normal_(0.0, 0.5);
  return model;
}

// The oracle: for each new token a full forward pass over its context (the same context rule as
// generate(), context_start); greedy takes the argmax of the last position's logits, sampling
// draws with choose_token() at the same uniforms generate() uses.
std::vector<int64_t> decode_by_full_forward(GPTImpl& model, std::vector<int64_t> seq, const SamplingOptions& o) {
  torch::NoGradGuard no_grad;
  const int64_t prompt = static_cast<int64_t>(seq.size());
  int64_t start = 0;
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const int64_t position = static_cast<int64_t>(seq.size());
    start = context_start(start, position, model.config().block_size);
    const auto ctx = torch::tensor(std::vector<int64_t>(seq.begin() + start, seq.end()), torch::kLong).view({1, -1});
    const auto logits = model.forward(ctx)[0][-1];
    seq.push_back(o.temperature == 0 ? logits.argmax().item<int64_t>()
                                     : choose_token(logits, o, sampling_uniform(o.seed, uint64_t(i))));
  }
  return std::vector<int64_t>(seq.begin() + prompt, seq.end());
}

SamplingOptions greedy_options(int64_t n) {
  SamplingOptions o;
  o.temperature = 0, o.max_new_tokens = n;
  return o;
}

class EveryArmSampling : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryArmSampling, CachedGreedyDecodeEqualsFullForwardPasses) {
  auto model = model_for(GetParam());
  const std::vector<int64_t> prompt = {3, 14, 15, 9, 2};
  const auto greedy = greedy_options(10);  // 5 + 10 tokens: inside block_size 16
  EXPECT_EQ(generate(*model, prompt, greedy), decode_by_full_forward(*model, prompt, greedy));
}

TEST_P(EveryArmSampling, CachedSampledDecodeEqualsFullForwardPasses) {
  // Sampling at temperature 1 with the same draws: the tokens vary (greedy decoding of an untrained
  // model soon repeats one token), so this compares the cache over many different contexts.
  auto model = model_for(GetParam());
  SamplingOptions o;
  o.temperature = 1.0, o.max_new_tokens = 11, o.seed = 3;
  const std::vector<int64_t> prompt = {3, 14, 15, 9, 2};
  const auto cached = generate(*model, prompt, o);
  EXPECT_EQ(cached, decode_by_full_forward(*model, prompt, o));
  EXPECT_GT(std::set<int64_t>(cached.begin(), cached.end()).size(), 3u);
}

TEST_P(EveryArmSampling, PastBlockSizeTheContextRestartsLikeTheOracle) {
  auto model = model_for(GetParam(), 8);
  // 30 new tokens: the context restarts from the last 4 tokens several times.
  const std::vector<int64_t> prompt = {1, 2, 3};
  for (const auto& o : {greedy_options(30), SamplingOptions{30, 1.0, 10, 5}})
    EXPECT_EQ(generate(*model, prompt, o), decode_by_full_forward(*model, prompt, o)) << o.temperature;
  // A prompt longer than block_size starts from its last block_size / 2 tokens.
  const std::vector<int64_t> long_prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  EXPECT_EQ(generate(*model, long_prompt, greedy_options(30)),
            decode_by_full_forward(*model, long_prompt, greedy_options(30)));
}

TEST_P(EveryArmSampling, TheSameSeedGivesTheSameTokens) {
  auto model = model_for(GetParam());
  SamplingOptions o;
  o.temperature = 1.0, o.top_k = 20, o.max_new_tokens = 12, o.seed = 42;
  const auto a = generate(*model, {4, 5}, o);
  EXPECT_EQ(a, generate(*model, {4, 5}, o));
  o.seed = 43;
  EXPECT_NE(a, generate(*model, {4, 5}, o));
}

INSTANTIATE_TEST_SUITE_P(AllArms, EveryArmSampling, ::testing::ValuesIn(testing_extra::registry_arm_names()),
                         [](const auto& info) { return info.param; });

TEST(ContextStart, RestartsFromHalfTheBlock) {
  EXPECT_EQ(context_start(0, 8, 8), 0);   // 8 tokens of context: fits
  EXPECT_EQ(context_start(0, 9, 8), 5);   // 9 would not: keep the last 4
  EXPECT_EQ(context_start(5, 13, 8), 5);
  EXPECT_EQ(context_start(5, 14, 8), 10);
  EXPECT_EQ(context_start(0, 2, 1), 1);   // block_size 1: the last token alone
  EXPECT_EQ(context_start(0, 100, 8), 96);  // a long prompt
}

at::Tensor logits_of(std::vector<double> v) { return torch::tensor(v, torch::kDouble); }

TEST(ChooseToken, GreedyTakesTheLargestAndTheLowestIdOnTies) {
  SamplingOptions greedy;
  greedy.temperature = 0;
  EXPECT_EQ(choose_token(logits_of({0.1, 2.0, -1.0, 2.0}), greedy, 0.99), 1);
  EXPECT_EQ(choose_token(logits_of({-INFINITY, -5.0}), greedy, 0.0), 1);
}

TEST(ChooseToken, InvertsTheSoftmaxCdf) {
  // logits log(1), log(2), log(3), log(4) at temperature 1: probabilities 0.1, 0.2, 0.3, 0.4 for
  // ids 0..3; sorted by logit the CDF runs id 3 (0.4), id 2 (0.7), id 1 (0.9), id 0 (1.0).
  SamplingOptions o;
  const auto l = logits_of({std::log(1.0), std::log(2.0), std::log(3.0), std::log(4.0)});
  EXPECT_EQ(choose_token(l, o, 0.0), 3);
  EXPECT_EQ(choose_token(l, o, 0.39), 3);
  EXPECT_EQ(choose_token(l, o, 0.41), 2);
  EXPECT_EQ(choose_token(l, o, 0.69), 2);
  EXPECT_EQ(choose_token(l, o, 0.71), 1);
  EXPECT_EQ(choose_token(l, o, 0.95), 0);
  // Temperature 0.5 squares the odds: 1, 4, 9, 16 (/30): id 3 up to 16/30 = 0.533.
  o.temperature = 0.5;
  EXPECT_EQ(choose_token(l, o, 0.53), 3);
  EXPECT_EQ(choose_token(l, o, 0.54), 2);
  // Top-2 keeps ids 3 and 2 (0.4 and 0.3, renormalised to 4/7 and 3/7).
  o.temperature = 1.0, o.top_k = 2;
  EXPECT_EQ(choose_token(l, o, 0.57), 3);
  EXPECT_EQ(choose_token(l, o, 0.58), 2);
  EXPECT_EQ(choose_token(l, o, 0.999), 2);
}

TEST(ChooseToken, ExtremeLogitsStayFinite) {
  SamplingOptions o;
  o.temperature = 1e-3;  // (1e4 - 0) / 1e-3 would overflow exp() without the shift by the top
  EXPECT_EQ(choose_token(logits_of({1e4, 0.0, -1e300}), o, 0.999999), 0);
  EXPECT_EQ(choose_token(logits_of({-1e300, -1e300}), o, 0.7), 1);  // equal: half each
}

TEST(ChooseToken, BadInputIsRefused) {
  SamplingOptions o;
  EXPECT_THROW(choose_token(logits_of({NAN, 1.0}), o, 0.5), std::invalid_argument);
  EXPECT_THROW(choose_token(logits_of({-INFINITY, -INFINITY}), o, 0.5), std::invalid_argument);
  EXPECT_THROW(choose_token(torch::zeros({2, 2}, torch::kDouble), o, 0.5), std::invalid_argument);
  o.temperature = -1;
  EXPECT_THROW(choose_token(logits_of({1.0}), o, 0.5), std::invalid_argument);
}

TEST(SamplingUniform, IsInTheUnitIntervalAndSpreads) {
  double sum = 0.0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = sampling_uniform(1, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);  // sd of the mean: 0.29 / 100
  EXPECT_NE(sampling_uniform(1, 0), sampling_uniform(2, 0));
}

TEST(Generate, RefusesAnEmptyPromptAndOutOfVocabularyIds) {
  auto model = model_for("baseline");
  SamplingOptions o;
  EXPECT_THROW(generate(*model, {}, o), std::invalid_argument);
  EXPECT_THROW(generate(*model, {50}, o), std::invalid_argument);
  EXPECT_THROW(generate(*model, {-1}, o), std::invalid_argument);
}

}  // namespace
}  // namespace attnlab
