// Run configuration: composition, overrides, and an error naming the key for every bad value.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "attnlab/run_config.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attnlab_cfg_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    write("tier.yaml", "tier: t\nmodel: {n_layer: 3, n_head: 2, d_model: 32, block_size: 64, vocab_size: 100}\n"
                       "train: {batch_size: 2, seq_len: 16, token_budget: 3200}\n");
    write("run.yaml", "include: [tier.yaml]\nseed: 5\nmodel: {arm: combo2}\n"
                      "data: {train: 'x_train_*.bin', val: 'x_val_*.bin'}\ntrain: {seq_len: 32}\n");
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  // The message of the ConfigError that loading `name` with `sets` throws.
  std::string error_of(const std::string& name, const std::vector<std::string>& sets = {}) {
    try {
      load_run_config(dir_ / name, sets);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir_;
};

TEST_F(ConfigTest, IncludesComposeAndLaterFilesWin) {
  const auto cfg = load_run_config(dir_ / "run.yaml");
  EXPECT_EQ(cfg.tier, "t");
  EXPECT_EQ(cfg.model.n_layer, 3);
  EXPECT_EQ(cfg.model.arm, "combo2");
  EXPECT_EQ(cfg.train.seq_len, 32);    // run.yaml overrides tier.yaml
  EXPECT_EQ(cfg.train.batch_size, 2);  // kept from tier.yaml
  EXPECT_EQ(cfg.seed, 5u);
  EXPECT_EQ(cfg.optim.beta2, 0.95);    // default (SPEC section 2)
  EXPECT_EQ(cfg.total_steps(), 50);    // 3200 / (2 * 32)
}

TEST_F(ConfigTest, SetOverridesAnyKey) {
  const auto cfg = load_run_config(dir_ / "run.yaml", {"optim.lr=3e-4", "model.arm=sink_logit", "train.max_steps=7"});
  EXPECT_DOUBLE_EQ(cfg.optim.lr, 3e-4);
  EXPECT_EQ(cfg.model.arm, "sink_logit");
  EXPECT_EQ(cfg.total_steps(), 7);
}

TEST_F(ConfigTest, UnknownKeyIsNamedWithSuggestion) {
  EXPECT_EQ(error_of("run.yaml", {"train.batchsize=4"}), "train.batchsize: unknown key (did you mean train.batch_size?)");
  write("bad.yaml", "include: [run.yaml]\noptimizer: {lr: 1}\n");
  EXPECT_NE(error_of("bad.yaml").find("optimizer: unknown key"), std::string::npos);
}

TEST_F(ConfigTest, WrongTypesNameTheKey) {
  EXPECT_EQ(error_of("run.yaml", {"optim.lr=fast"}), "optim.lr: expected a number, got 'fast'");
  EXPECT_EQ(error_of("run.yaml", {"train.batch_size=2.5"}), "train.batch_size: expected an integer, got '2.5'");
  EXPECT_EQ(error_of("run.yaml", {"seed=-1"}), "seed: expected an integer, got '-1'");
  EXPECT_EQ(error_of("run.yaml", {"model=3"}), "model: expected a mapping of keys");
  EXPECT_EQ(error_of("run.yaml", {"checkpoint.log_spaced=maybe"}), "checkpoint.log_spaced: expected true or false, got 'maybe'");
  EXPECT_EQ(error_of("run.yaml", {"track.activations.evry=5"}),
            "track.activations.evry: unknown key (did you mean track.activations.every?)");
}

TEST_F(ConfigTest, TrackingKeysAreCheckedAndStayOutOfTheHash) {
  EXPECT_EQ(error_of("run.yaml", {"track.activations.every=-1"}),
            "track.activations.every: must be >= 0 (0 turns tracking off)");
  EXPECT_EQ(error_of("run.yaml", {"track.activations.sequences=0"}), "track.activations.sequences: must be positive");
  EXPECT_EQ(error_of("run.yaml", {"track.activations.massive_ratio=0.5"}), "track.activations.massive_ratio: must be >= 1");
  EXPECT_EQ(error_of("run.yaml", {"checkpoint.log_spaced_until=0"}), "checkpoint.log_spaced_until: must be at least 1");
  EXPECT_EQ(error_of("run.yaml", {"checkpoint.keep_every=-2"}),
            "checkpoint.keep_every: must be >= 0 (0 keeps no extra checkpoints)");
  const auto plain = load_run_config(dir_ / "run.yaml");
  const auto tracked = load_run_config(dir_ / "run.yaml", {"track.activations.every=50", "track.activations.top_k=3"});
  EXPECT_EQ(tracked.track.activations.every, 50);
  EXPECT_EQ(config_hash(plain), config_hash(tracked));  // observation, not computation
  EXPECT_EQ(differing_keys(plain, tracked), (std::vector<std::string>{"track.activations.every", "track.activations.top_k"}));
  EXPECT_TRUE(is_observation_key("track.activations.every"));
  EXPECT_FALSE(is_observation_key("optim.weight_decay"));
  EXPECT_NE(config_hash(plain), config_hash(load_run_config(dir_ / "run.yaml", {"checkpoint.keep_every=10"})));
}

TEST_F(ConfigTest, ImpossibleValuesNameTheKey) {
  EXPECT_NE(error_of("run.yaml", {"model.arm=sinklogit"}).find("unknown attention arm 'sinklogit'"), std::string::npos);
  EXPECT_EQ(error_of("run.yaml", {"model.d_model=33"}), "model.d_model = 33 is not divisible by model.n_head = 2");
  EXPECT_EQ(error_of("run.yaml", {"train.seq_len=65"}), "train.seq_len = 65 exceeds model.block_size = 64");
  EXPECT_EQ(error_of("run.yaml", {"train.tokens_per_step=100"}),
            "train.tokens_per_step = 100 must be a multiple of train.batch_size * train.seq_len = 64");
  EXPECT_EQ(error_of("run.yaml", {"attention.backend=fast"}),
            "attention.backend: 'fast' is not one of auto, fused, reference, sdpa, flash");
  EXPECT_NE(error_of("run.yaml", {"attention.backend=sdpa"}).find("model.arm 'combo2'"), std::string::npos);
  EXPECT_EQ(error_of("run.yaml", {"optim.beta2=1"}), "optim.beta2: must lie in [0, 1)");
  EXPECT_EQ(error_of("run.yaml", {"model.routing_gate=sparse"}),
            "model.routing_gate: unknown gate form 'sparse'; valid: none, norm, projection");
  EXPECT_EQ(error_of("tier.yaml"), "data.train: required (a glob of llm.c-format train shards)");
}

TEST_F(ConfigTest, FileErrorsNameTheFile) {
  EXPECT_NE(error_of("missing.yaml").find("missing.yaml: config file not found"), std::string::npos);
  write("broken.yaml", "model: {arm: [\n");
  EXPECT_NE(error_of("broken.yaml").find("broken.yaml"), std::string::npos);
  write("loop.yaml", "include: [loop.yaml]\n");
  EXPECT_NE(error_of("loop.yaml").find("include cycle"), std::string::npos);
  EXPECT_NE(error_of("run.yaml", {"optim.lr"}).find("expected key=value"), std::string::npos);
}

TEST_F(ConfigTest, ResolvedConfigRoundTripsExactly) {
  auto cfg = load_run_config(dir_ / "run.yaml", {"optim.lr=0.0006000000000000001", "optim.eps=1e-8"});
  auto again = run_config_from_json(to_json(cfg));
  EXPECT_TRUE(differing_keys(cfg, again).empty());
  write("resolved.yaml", to_yaml(cfg));
  auto reloaded = load_run_config(dir_ / "resolved.yaml");
  EXPECT_TRUE(differing_keys(cfg, reloaded).empty());
  EXPECT_EQ(reloaded.optim.lr, 0.0006000000000000001);
  EXPECT_EQ(config_hash(cfg), config_hash(reloaded));
}

TEST_F(ConfigTest, DifferingKeysListsExactlyTheChangedKeys) {
  auto a = load_run_config(dir_ / "run.yaml");
  auto b = load_run_config(dir_ / "run.yaml", {"optim.lr=1e-3", "model.arm=baseline"});
  auto keys = differing_keys(a, b);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"model.arm", "optim.lr"}));
  EXPECT_NE(config_hash(a), config_hash(b));
}

}  // namespace
}  // namespace attnlab
