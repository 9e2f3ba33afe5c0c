// The GPT of SPEC section 2 with every arm: parameter counts, decay groups, paired initialisation,
// KV-cache decoding, the sink token's gradient, and clear errors for bad configs.
#include <gtest/gtest.h>

#include <set>

#include <torch/torch.h>

#include "attnlab/arm_params.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/param_groups.h"
#include "extra_arm.h"

namespace attnlab {
namespace {

ModelConfig tiny(const std::string& arm) {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.block_size = 16, cfg.vocab_size = 50;
  return cfg;
}

GPT build(const ModelConfig& cfg, uint64_t seed, at::ScalarType dtype = at::kFloat) {
  GPT model(cfg);
  init_parameters(*model, seed);
  model->to(dtype);
  return model;
}

int64_t numel(const GPT& model) {
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  return n;
}

class EveryArm : public ::testing::TestWithParam<std::string> {};

// docs/arms.md's table, written out per arm: L layers, H heads, head dim d, width D. An arm the table
// does not list (the tenth-arm test's) gets the rule the table follows: H for a learned sink logit, H
// for a norm gate, H (d + 1) for a projection gate, H (D + 1) or H d (D + 1) for a headwise or
// elementwise output gate, per layer, and D once for a sink token.
TEST_P(EveryArm, ExtraParameterCountMatchesSpecTable) {
  const int64_t L = 6, H = 6, d = 64, D = 384;
  const std::map<std::string, int64_t> table = {
      {"baseline", 0},         {"off_by_one", 0},      {"sink_token", D},    {"sink_logit", L * H},
      {"norm_gate", L * H},    {"proj_gate", L * H * (d + 1)}, {"renorm", L * H},
      {"combo", L * 2 * H},    {"combo2", L * H * (d + 2)},  {"out_gate", L * H * (D + 1)},
      {"out_gate_elem", L * H * d * (D + 1)},                 {"sink_out_gate", L * H * (D + 2)}};
  const auto& arm = arm_by_name(GetParam());
  const int64_t gate = arm.gate == GateKind::norm ? H : arm.gate == GateKind::projection ? H * (d + 1) : 0;
  const int64_t out_gate = arm.out_gate == OutputGate::headwise ? H * (D + 1)
                           : arm.out_gate == OutputGate::elementwise ? H * d * (D + 1) : 0;
  const int64_t by_rule =
      L * ((arm.sink == SinkKind::learned ? H : 0) + gate + out_gate) + (arm.sink_token ? D : 0);
  EXPECT_EQ(arm_extra_params(arm, L, H, d, D), table.count(arm.name) ? table.at(arm.name) : by_rule);
}

TEST_P(EveryArm, CountsMatchTheBuiltModel) {
  const auto cfg = tiny(GetParam());
  const auto counts = count_params(cfg);
  EXPECT_EQ(numel(build(cfg, 1)), counts.total);
  EXPECT_EQ(numel(build(cfg, 1)) - numel(build(tiny("baseline"), 1)), counts.arm_extra);
}

TEST_P(EveryArm, SharedParametersAreBitIdenticalAcrossArms) {
  auto base = build(tiny("baseline"), 7);
  auto other = build(tiny(GetParam()), 7);
  auto base_params = base->named_parameters();
  int shared = 0;
  for (const auto& item : other->named_parameters()) {
    if (const auto* p = base_params.find(item.key())) {
      EXPECT_TRUE(torch::equal(*p, item.value())) << item.key();
      ++shared;
    }
  }
  EXPECT_EQ(shared, static_cast<int>(base_params.size()));  // every baseline parameter is shared
}

// Gates and sink logits moved away from their init, so the cached gated reads and the sink matter.
void open_gates_and_sinks(GPTImpl& model) {
  for (auto& item : model.named_parameters()) {
    if (item.key().find("gate_") != std::string::npos || item.key().find("sink_logit") != std::string::npos)
      item.value().uniform_(-1.0, 1.0);
  }
}

TEST_P(EveryArm, KvCacheDecodingEqualsFullForward) {
  const auto cfg = tiny(GetParam());
  auto model = build(cfg, 3, at::kDouble);
  torch::NoGradGuard no_grad;
  open_gates_and_sinks(*model);
  torch::manual_seed(0);
  auto idx = torch::randint(0, cfg.vocab_size, {2, 11}, torch::kLong);
  auto full = model->forward(idx);  // (B, T, V)
  KVCache cache;
  std::vector<at::Tensor> parts = {model->forward_cached(idx.narrow(1, 0, 4), cache)};  // prefill
  for (int64_t t = 4; t < 11; ++t) parts.push_back(model->forward_cached(idx.narrow(1, t, 1), cache));
  auto decoded = torch::cat(parts, 1);
  EXPECT_LT((decoded - full).abs().max().item<double>(), 1e-12);
  EXPECT_EQ(cache.length(), 11 + (model->arm().sink_token ? 1 : 0));
}

// Decoding a windowed model (docs/windows.md, "KV-cache decoding") equals its full forward for more
// steps than W + n, and a local layer holds at most n + W - 1 entries between steps, a global one
// every position. With rotary positions too: a trimmed cache no longer counts the positions.
TEST_P(EveryArm, WindowedKvCacheDecodingEqualsFullForward) {
  for (int64_t keep : {0, 1}) {
    for (double rotary : {0.0, 0.5}) {
      auto cfg = tiny(GetParam());
      cfg.window = 3, cfg.window_pattern = "LG", cfg.window_keep_first = keep, cfg.rotary_fraction = rotary;
      auto model = build(cfg, 3, at::kDouble);
      torch::NoGradGuard no_grad;
      open_gates_and_sinks(*model);
      torch::manual_seed(1);
      auto idx = torch::randint(0, cfg.vocab_size, {2, 12}, torch::kLong);
      auto full = model->forward(idx);
      const std::string what = "n " + std::to_string(keep) + " rotary " + std::to_string(rotary);
      auto unwindowed = tiny(GetParam());
      unwindowed.rotary_fraction = rotary;
      EXPECT_GT((build(unwindowed, 3, at::kDouble)->forward(idx) - full).abs().max().item<double>(), 1e-6)
          << what << ": the window changes nothing";
      KVCache cache;
      std::vector<at::Tensor> parts = {model->forward_cached(idx.narrow(1, 0, 5), cache)};  // prefill past W + n
      const int64_t extra = model->arm().sink_token ? 1 : 0;
      for (int64_t t = 5; t < 12; ++t) {
        parts.push_back(model->forward_cached(idx.narrow(1, t, 1), cache));
        EXPECT_EQ(cache.layers[0].k.size(2), keep + 3 - 1) << what << ": local layer at step " << t;
        EXPECT_EQ(cache.layers[1].k.size(2), t + 1 + extra) << what << ": global layer at step " << t;
      }
      EXPECT_LT((torch::cat(parts, 1) - full).abs().max().item<double>(), 1e-12) << what;
      EXPECT_EQ(cache.length(), 12 + extra);
    }
  }
}

// A window that hides no key of the call runs as a global layer: bit for bit the model without one.
TEST_P(EveryArm, WindowThatHidesNothingIsBitIdentical) {
  auto cfg = tiny(GetParam());
  auto windowed = cfg;
  windowed.window = 8, windowed.window_keep_first = 1;  // 8 positions (9 with sink_token's) <= W + n = 9
  auto idx = torch::randint(0, cfg.vocab_size, {2, 8}, torch::kLong);
  EXPECT_TRUE(at::equal(build(cfg, 4)->forward(idx), build(windowed, 4)->forward(idx)));
}

TEST_P(EveryArm, ForwardBackwardRunsAndLogitsCoverTheRealVocab) {
  const auto cfg = tiny(GetParam());
  auto model = build(cfg, 5);
  auto idx = torch::randint(0, cfg.vocab_size, {2, 9}, torch::kLong);
  auto targets = torch::randint(0, cfg.vocab_size, {2, 9}, torch::kLong);  // unrelated to the input
  auto logits = model->forward(idx);
  EXPECT_EQ(logits.sizes(), (at::IntArrayRef{2, 9, cfg.vocab_size}));
  auto loss = lm_loss(logits, targets);
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), std::log(double(cfg.vocab_size)), 0.2);  // near-uniform at init
  for (const auto& item : model->named_parameters())
    EXPECT_TRUE(item.value().grad().defined()) << item.key() << " gets no gradient";
}

INSTANTIATE_TEST_SUITE_P(AllArms, EveryArm, ::testing::ValuesIn(testing_extra::registry_arm_names()),
                         [](const auto& info) { return info.param; });

// The built-in registry; the tenth-arm test's extension adds its own arm on top.
TEST(Model, RegistryHoldsExactlyTheSpecArms) {
  std::set<std::string> names;
  for (const auto& arm : all_arms())
    if (arm.name != testing_extra::extra_arm_name()) names.insert(arm.name);
  EXPECT_EQ(names, (std::set<std::string>{"baseline", "off_by_one", "sink_token", "sink_logit", "norm_gate",
                                          "proj_gate", "renorm", "combo", "combo2", "out_gate",
                                          "out_gate_elem", "sink_out_gate"}));
}

TEST(Model, WeightDecayGroupsFollowSpec) {
  auto cfg = tiny("combo2");
  cfg.n_layer = 1;
  auto groups = parameter_groups(*build(cfg, 1));
  const std::vector<std::string> decay = {"wte.weight",           "wpe.weight",           "h.0.attn.c_attn.weight",
                                          "h.0.attn.c_proj.weight", "h.0.mlp.c_fc.weight", "h.0.mlp.c_proj.weight"};
  EXPECT_EQ(std::set<std::string>(groups.decay_names.begin(), groups.decay_names.end()),
            std::set<std::string>(decay.begin(), decay.end()));
  const std::set<std::string> no_decay(groups.no_decay_names.begin(), groups.no_decay_names.end());
  for (const char* name : {"h.0.attn.sink_logit", "h.0.attn.gate_w", "h.0.attn.gate_c", "h.0.ln_1.weight",
                           "h.0.ln_1.bias", "h.0.attn.c_attn.bias", "ln_f.weight", "ln_f.bias"})
    EXPECT_TRUE(no_decay.count(name)) << name;
  EXPECT_EQ(groups.decay.size() + groups.no_decay.size(), build(cfg, 1)->parameters().size());

  auto st = parameter_groups(*build(tiny("sink_token"), 1));
  EXPECT_NE(std::find(st.no_decay_names.begin(), st.no_decay_names.end(), "sink_token"), st.no_decay_names.end());
  auto ng = parameter_groups(*build(tiny("norm_gate"), 1));
  EXPECT_NE(std::find(ng.no_decay_names.begin(), ng.no_decay_names.end(), "h.1.attn.gate_tau"), ng.no_decay_names.end());
}

TEST(Model, ArmParametersStartAtSpecValues) {
  auto model = build(tiny("combo"), 9);
  auto params = model->named_parameters();
  EXPECT_TRUE(torch::equal(params["h.0.attn.sink_logit"], torch::zeros({2})));
  EXPECT_TRUE(torch::equal(params["h.1.attn.gate_tau"], torch::full({2}, -0.5)));
  auto m2 = build(tiny("combo2"), 9);
  EXPECT_TRUE(torch::equal(m2->named_parameters()["h.0.attn.gate_w"], torch::zeros({2, 8})));
  EXPECT_TRUE(torch::equal(m2->named_parameters()["h.0.attn.gate_c"], torch::full({2}, 4.0)));
}

TEST(Model, SeedChangesInitialisation) {
  auto a = build(tiny("baseline"), 1), b = build(tiny("baseline"), 2);
  EXPECT_FALSE(torch::equal(a->named_parameters()["wte.weight"], b->named_parameters()["wte.weight"]));
}

// d loss / d e_sink of the full model against central finite differences in float64.
TEST(Model, SinkTokenGradientMatchesFiniteDifferences) {
  auto cfg = tiny("sink_token");
  auto model = build(cfg, 4, at::kDouble);
  torch::manual_seed(1);
  auto idx = torch::randint(0, cfg.vocab_size, {2, 7}, torch::kLong);
  lm_loss(model->forward(idx), idx).backward();
  auto grad = model->sink_token.grad().clone();
  torch::NoGradGuard no_grad;
  const double h = 1e-6;
  for (int64_t c = 0; c < cfg.d_model; ++c) {
    const double x0 = model->sink_token[c].item<double>();
    model->sink_token[c].fill_(x0 + h);
    const double up = lm_loss(model->forward(idx), idx).item<double>();
    model->sink_token[c].fill_(x0 - h);
    const double down = lm_loss(model->forward(idx), idx).item<double>();
    model->sink_token[c].fill_(x0);
    EXPECT_NEAR(grad[c].item<double>(), (up - down) / (2 * h), 1e-8) << "channel " << c;
  }
}

TEST(Model, BadArmNameIsAClearError) {
  auto cfg = tiny("sinklogit");
  try {
    GPT model(cfg);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'sinklogit'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sink_logit"), std::string::npos) << msg;  // lists the valid names
  }
}

TEST(Model, ImpossibleDimsAreAClearError) {
  auto cfg = tiny("baseline");
  cfg.d_model = 130, cfg.n_head = 4;
  try {
    cfg.validate();
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("130"), std::string::npos) << msg;
    EXPECT_NE(msg.find("n_head = 4"), std::string::npos) << msg;
  }
  cfg = tiny("baseline");
  cfg.n_layer = 0;
  EXPECT_THROW(cfg.validate(), std::invalid_argument);
}

TEST(Model, SequenceLongerThanContextIsRejected) {
  auto model = build(tiny("baseline"), 1);
  auto idx = torch::zeros({1, 17}, torch::kLong);
  EXPECT_THROW(model->forward(idx), std::invalid_argument);
}

TEST(Model, PaddedVocabIsAMultipleOf64) {
  ModelConfig cfg;
  cfg.vocab_size = 50257;
  EXPECT_EQ(cfg.padded_vocab(), 50304);
  cfg.vocab_size = 4096;
  EXPECT_EQ(cfg.padded_vocab(), 4096);
}

TEST(Model, TierParameterCountsMatchSpec) {
  // SPEC section 2: non-embedding ~10.6M, ~49M, ~127M, ~352M (baseline).
  struct Tier { int64_t L, D, H; double want_millions; };
  for (const auto& t : {Tier{6, 384, 6, 10.6}, Tier{10, 640, 10, 49}, Tier{18, 768, 12, 127}, Tier{28, 1024, 16, 352}}) {
    ModelConfig cfg;
    cfg.n_layer = t.L, cfg.d_model = t.D, cfg.n_head = t.H, cfg.vocab_size = 50257, cfg.block_size = 1024;
    EXPECT_NEAR(count_params(cfg).non_embedding / 1e6, t.want_millions, 0.02 * t.want_millions) << t.L;
  }
}

}  // namespace
}  // namespace attnlab
