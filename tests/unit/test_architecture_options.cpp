// The model options GPT-NeoX / Pythia need (docs/interop.md): rotary positions with a rotary fraction,
// parallel residual, untied LM head, exact GELU. Each is off by default, each is checked against its
// formula written out here, and each composes with every arm (KV-cache decoding included).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "attnlab/checkpoint.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/rotary.h"
#include "attnlab/run_config.h"
#include "attnlab/run_dir.h"
#include "attnlab/trained_run.h"
#include "extra_arm.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

ModelConfig with_options(const std::string& arm) {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.block_size = 16, cfg.vocab_size = 50;
  cfg.rotary_fraction = 0.5, cfg.rotary_base = 100.0;  // 4 of head_dim 8 rotate
  cfg.parallel_residual = true, cfg.untied_head = true, cfg.gelu = GeluKind::erf;
  return cfg;
}

GPT build(const ModelConfig& cfg, uint64_t seed, at::ScalarType dtype = at::kDouble) {
  GPT model(cfg);
  init_parameters(*model, seed);
  model->to(dtype);
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(seed);
  for (auto& p : model->parameters()) p.add_(at::normal(0.0, 0.2, p.sizes(), gen).to(dtype));  // off init
  return model;
}

// ---- rotary ---------------------------------------------------------------------------------------

TEST(Rotary, RotatesPairsByPositionTimesFrequencyAndLeavesTheRest) {
  const int64_t B = 2, H = 2, T = 5, d = 8, r = 4, first = 3;
  const double base = 100.0;
  auto x = torch::randn({B, H, T, d}, torch::kDouble);
  const auto y = apply_rotary(x, first, r, base);
  auto xa = x.accessor<double, 4>();
  auto ya = y.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t i = 0; i < r / 2; ++i) {
          const double angle = double(first + t) * std::pow(base, -2.0 * double(i) / double(r));
          const double a = xa[b][h][t][i], c = xa[b][h][t][i + r / 2];
          EXPECT_NEAR(ya[b][h][t][i], a * std::cos(angle) - c * std::sin(angle), 1e-12);
          EXPECT_NEAR(ya[b][h][t][i + r / 2], c * std::cos(angle) + a * std::sin(angle), 1e-12);
        }
        for (int64_t i = r; i < d; ++i) EXPECT_EQ(ya[b][h][t][i], xa[b][h][t][i]);
      }
}

TEST(Rotary, ScoresDependOnlyOnTheDistanceBetweenPositions) {
  auto q = torch::randn({1, 1, 6, 8}, torch::kDouble), k = torch::randn({1, 1, 6, 8}, torch::kDouble);
  auto scores = [&](int64_t first) {
    return torch::matmul(apply_rotary(q, first, 8, 10000.0), apply_rotary(k, first, 8, 10000.0).transpose(-2, -1));
  };
  EXPECT_LT((scores(0) - scores(17)).abs().max().item<double>(), 1e-10);
  EXPECT_GT((scores(0) - torch::matmul(q, k.transpose(-2, -1))).abs().max().item<double>(), 1e-3);
}

TEST(Rotary, BadDimsAreAClearError) {
  auto x = torch::zeros({1, 1, 2, 8});
  EXPECT_THROW(apply_rotary(x, 0, 3, 1e4), std::invalid_argument);   // odd
  EXPECT_THROW(apply_rotary(x, 0, 10, 1e4), std::invalid_argument);  // more than head_dim
  EXPECT_THROW(apply_rotary(torch::zeros({2, 8}), 0, 4, 1e4), std::invalid_argument);
}

// ---- every arm with every option -------------------------------------------------------------------

class EveryArmWithOptions : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryArmWithOptions, KvCacheDecodingEqualsFullForward) {
  const auto cfg = with_options(GetParam());
  auto model = build(cfg, 3);
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  auto idx = torch::randint(0, cfg.vocab_size, {2, 11}, torch::kLong);
  auto full = model->forward(idx);
  KVCache cache;
  std::vector<at::Tensor> parts = {model->forward_cached(idx.narrow(1, 0, 4), cache)};
  for (int64_t t = 4; t < 11; ++t) parts.push_back(model->forward_cached(idx.narrow(1, t, 1), cache));
  EXPECT_LT((torch::cat(parts, 1) - full).abs().max().item<double>(), 1e-12);
}

TEST_P(EveryArmWithOptions, CountsMatchTheBuiltModelAndNameTheNewParameters) {
  const auto cfg = with_options(GetParam());
  auto model = build(cfg, 1, at::kFloat);
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  const auto counts = count_params(cfg);
  EXPECT_EQ(n, counts.total);
  EXPECT_EQ(counts.total - counts.non_embedding, 2 * cfg.padded_vocab() * cfg.d_model);  // wte + lm_head, no wpe
  const auto params = model->named_parameters();
  EXPECT_EQ(params.find("wpe.weight"), nullptr);
  ASSERT_NE(params.find("lm_head.weight"), nullptr);
  EXPECT_EQ(params["lm_head.weight"].sizes(), (at::IntArrayRef{cfg.padded_vocab(), cfg.d_model}));
  EXPECT_TRUE(model->decays("lm_head.weight"));
  EXPECT_FALSE(torch::equal(params["lm_head.weight"], params["wte.weight"]));
}

INSTANTIATE_TEST_SUITE_P(AllArms, EveryArmWithOptions, ::testing::ValuesIn(testing_extra::registry_arm_names()),
                         [](const auto& info) { return info.param; });

// ---- each option against its formula ----------------------------------------------------------------

TEST(Options, OffByDefaultSoAModelIsGpt2) {
  const ModelConfig cfg;
  EXPECT_EQ(cfg.rotary_fraction, 0.0);
  EXPECT_EQ(cfg.rotary_dims(), 0);
  EXPECT_FALSE(cfg.parallel_residual);
  EXPECT_FALSE(cfg.untied_head);
  EXPECT_EQ(cfg.gelu, GeluKind::tanh);
  GPT model(cfg);
  EXPECT_NE(model->named_parameters().find("wpe.weight"), nullptr);
  EXPECT_EQ(model->named_parameters().find("lm_head.weight"), nullptr);
}

TEST(Options, ParallelResidualAddsBothBranchesToTheInput) {
  auto cfg = with_options("combo");
  auto model = build(cfg, 2);
  auto& block = *model->h[0]->as<Block>();
  torch::NoGradGuard no_grad;
  auto x = torch::randn({2, 5, cfg.d_model}, torch::kDouble);
  const auto want = x + block.attn->forward(block.ln_1(x), 0) + block.mlp->forward(block.ln_2(x));
  EXPECT_LT((block.forward(x, 0) - want).abs().max().item<double>(), 1e-12);

  cfg.parallel_residual = false;
  auto sequential = build(cfg, 2);
  auto& s = *sequential->h[0]->as<Block>();
  const auto y = x + s.attn->forward(s.ln_1(x), 0);
  EXPECT_LT((s.forward(x, 0) - (y + s.mlp->forward(s.ln_2(y)))).abs().max().item<double>(), 1e-12);
}

TEST(Options, GeluIsExactOrTheTanhApproximation) {
  torch::NoGradGuard no_grad;
  for (const GeluKind gelu : {GeluKind::erf, GeluKind::tanh}) {
    MLP mlp(4, gelu);
    mlp->to(torch::kDouble);
    auto x = torch::randn({3, 4}, torch::kDouble) * 3;
    auto h = mlp->c_fc(x);
    auto ha = h.accessor<double, 2>();
    auto act = torch::empty_like(h);
    auto aa = act.accessor<double, 2>();
    const double pi = std::acos(-1.0);
    for (int64_t i = 0; i < h.size(0); ++i)
      for (int64_t j = 0; j < h.size(1); ++j) {
        const double v = ha[i][j];
        aa[i][j] = gelu == GeluKind::erf ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
                                 : 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v)));
      }
    EXPECT_LT((mlp->forward(x) - mlp->c_proj(act)).abs().max().item<double>(), 1e-12) << to_string(gelu);
  }
}

TEST(Options, UntiedHeadComputesTheLogitsAndTheTiedOneDoesNot) {
  const auto cfg = with_options("baseline");
  auto model = build(cfg, 4);
  torch::NoGradGuard no_grad;
  auto idx = torch::randint(0, cfg.vocab_size, {1, 7}, torch::kLong);
  at::Tensor last;
  ForwardHooks hooks;
  hooks.on_residual = [&](int64_t l, const at::Tensor& x) {
    if (l == cfg.n_layer) last = x;
    return x;
  };
  const auto logits = model->forward(idx, &hooks);
  const auto want = torch::matmul(model->ln_f(last), model->lm_head->weight.t()).narrow(-1, 0, cfg.vocab_size);
  EXPECT_LT((logits - want).abs().max().item<double>(), 1e-12);
  const auto tied = torch::matmul(model->ln_f(last), model->wte->weight.t()).narrow(-1, 0, cfg.vocab_size);
  EXPECT_GT((logits - tied).abs().max().item<double>(), 1e-3);
}

TEST(Options, RotaryModelHasNoPositionTable) {
  auto cfg = with_options("baseline");
  auto model = build(cfg, 5);
  torch::NoGradGuard no_grad;
  auto idx = torch::randint(0, cfg.vocab_size, {1, 8}, torch::kLong);
  // Positions live in the rotation of q and k; block_size still bounds the sequence.
  EXPECT_TRUE(model->wpe.is_empty());
  const auto logits = model->forward(idx);
  EXPECT_EQ(logits.sizes(), (at::IntArrayRef{1, 8, cfg.vocab_size}));
  EXPECT_THROW(model->forward(torch::zeros({1, cfg.block_size + 1}, torch::kLong)), std::invalid_argument);
}

// ---- config keys, checkpoints ------------------------------------------------------------------------

TEST(Options, ConfigKeysReadWriteAndRefuseImpossibleValues) {
  testing::TempDir tmp;
  tmp.write_text("run.yaml",
                 "model: {n_layer: 2, n_head: 2, d_model: 32, block_size: 32, vocab_size: 64, rotary_fraction: 0.25,\n"
                 "        rotary_base: 500, parallel_residual: true, untied_head: true, gelu: erf}\n"
                 "data: {train: a, val: b}\ntrain: {seq_len: 16, max_steps: 1}\n");
  const auto cfg = load_run_config(tmp.file("run.yaml"));
  EXPECT_EQ(cfg.model.rotary_fraction, 0.25);
  EXPECT_EQ(cfg.model.rotary_dims(), 4);
  EXPECT_EQ(cfg.model.rotary_base, 500.0);
  EXPECT_TRUE(cfg.model.parallel_residual);
  EXPECT_TRUE(cfg.model.untied_head);
  EXPECT_EQ(cfg.model.gelu, GeluKind::erf);
  EXPECT_EQ(run_config_from_json(to_json(cfg)).model.gelu, GeluKind::erf);
  EXPECT_EQ(to_json(RunConfig{})["model"]["parallel_residual"], false);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"model.rotary_fraction=1.5", "rotary_fraction"}, {"model.rotary_fraction=0.1", "even"},
      {"model.rotary_base=0", "rotary_base"},          {"model.gelu=relu", "gelu"},
      {"model.untied_head=maybe", "untied_head"}};
  for (const auto& [assignment, named] : bad) {
    try {
      load_run_config(tmp.file("run.yaml"), {assignment});
      ADD_FAILURE() << assignment << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << assignment << ": " << e.what();
    }
  }
}

TEST(Options, ConfigHashOfARunWithoutTheOptionsIsTheOneItHadBefore) {
  testing::TempDir tmp;
  tmp.write_text("run.yaml",
                 "model: {arm: combo, n_layer: 2, n_head: 2, d_model: 32, block_size: 32, vocab_size: 64}\n"
                 "data: {train: a, val: b}\ntrain: {seq_len: 16, max_steps: 5}\n");
  // `attnlab config` of the revision before the options existed printed this hash for this file, so
  // finished runs stay finished (not stale) for sweeps and reports.
  EXPECT_EQ(config_hash(load_run_config(tmp.file("run.yaml"))), "fe7556994e3be4e6");
  for (const char* option : {"model.rotary_fraction=0.25", "model.parallel_residual=true", "model.untied_head=true",
                             "model.gelu=erf"})
    EXPECT_NE(config_hash(load_run_config(tmp.file("run.yaml"), {option})), "fe7556994e3be4e6") << option;
}

TEST(Options, WeightsOnlyCheckpointKeepsTheOptionsAndOlderStateFilesLoadWithThemOff) {
  testing::TempDir tmp;
  const auto cfg = with_options("sink_logit");
  auto model = build(cfg, 6, at::kFloat);
  TrainState state;
  state.step = 12;
  const fs::path dir = save_weights_checkpoint(RunDir(tmp.path()).checkpoints_path(), *model, state);
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "optimizer.safetensors"));
  EXPECT_THROW(load_checkpoint(dir, /*with_optimizer=*/true), CheckpointError);
  auto loaded = open_model(tmp.path());
  EXPECT_EQ(loaded.step, 12);
  EXPECT_EQ(loaded.model_config.rotary_dims(), 4);
  EXPECT_EQ(loaded.model_config.gelu, GeluKind::erf);
  auto idx = torch::randint(0, cfg.vocab_size, {1, 6}, torch::kLong);
  EXPECT_TRUE(torch::equal(loaded.model->forward(idx), model->forward(idx)));

  // A state.json from before the options existed: its model has none of the keys.
  GPT plain(ModelConfig{});
  const fs::path old_dir = save_weights_checkpoint(RunDir(tmp.file("old")).checkpoints_path(), *plain, state);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(old_dir / "state.json"));
  for (const char* key : {"rotary_fraction", "rotary_base", "parallel_residual", "untied_head", "gelu"}) j["model"].erase(key);
  j["format_version"] = 1;  // it also predates state.json.sha256 (docs/checkpoints.md, format 1)
  std::ofstream(old_dir / "state.json") << j.dump(2);
  fs::remove(old_dir / "state.json.sha256");
  const auto old = load_checkpoint(old_dir, false);
  EXPECT_EQ(old.model_config.rotary_fraction, 0.0);
  EXPECT_FALSE(old.model_config.untied_head);
  EXPECT_EQ(old.model_config.gelu, GeluKind::tanh);
}

}  // namespace
}  // namespace attnlab
