// Run configuration: composition, overrides, and an error naming the key for every bad value.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "attnlab/run_config.h"
#include "attnlab/sweep.h"

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

// optim.name (docs/config.md, "Optimizers"): unset, a config keeps the bytes and the hash the build
// before it printed for run.yaml (d78697878743a01f), and adamw or a default is no change; set, it
// and its keys are written, read back and hashed; each refusal names its key.
TEST_F(ConfigTest, OptimizerKeysAreOptionalAndKeepOldHashes) {
  const auto plain = load_run_config(dir_ / "run.yaml");
  EXPECT_EQ(config_hash(plain), "d78697878743a01f");
  EXPECT_FALSE(plain.optim.name.has_value());
  EXPECT_EQ(plain.optim.optimizer(), OptimizerName::adamw);
  for (const char* key : {"name:", "momentum:", "nesterov:", "muon_lr:"})
    EXPECT_EQ(to_yaml(plain).find(key), std::string::npos) << key;
  const auto adamw = load_run_config(dir_ / "run.yaml", {"optim.name=adamw"});
  EXPECT_FALSE(adamw.optim.name.has_value());
  EXPECT_EQ(to_yaml(adamw), to_yaml(plain));
  const auto sgd_defaults = load_run_config(dir_ / "run.yaml", {"optim.name=sgd", "optim.momentum=0.9", "optim.nesterov=false"});
  EXPECT_FALSE(sgd_defaults.optim.momentum.has_value());  // sgd's defaults say nothing more
  EXPECT_FALSE(sgd_defaults.optim.nesterov.has_value());

  const auto sgd = load_run_config(dir_ / "run.yaml", {"optim.name=sgd"});
  EXPECT_EQ(sgd.optim.effective_momentum(), 0.9);
  EXPECT_FALSE(sgd.optim.effective_nesterov());
  const auto muon = load_run_config(dir_ / "run.yaml", {"optim.name=muon", "optim.momentum=0.9", "optim.muon_lr=0.01"});
  EXPECT_EQ(muon.optim.effective_momentum(), 0.9);
  EXPECT_TRUE(muon.optim.effective_nesterov());
  EXPECT_EQ(muon.optim.effective_muon_lr(), 0.01);
  EXPECT_EQ(load_run_config(dir_ / "run.yaml", {"optim.name=muon"}).optim.effective_momentum(), 0.95);
  EXPECT_NE(config_hash(sgd), config_hash(plain));
  EXPECT_NE(config_hash(muon), config_hash(sgd));
  EXPECT_EQ(differing_keys(plain, sgd), (std::vector<std::string>{"optim.name"}));
  EXPECT_NE(to_yaml(muon).find("name: muon"), std::string::npos);
  const auto back = run_config_from_json(to_json(muon));
  EXPECT_EQ(back.optim.name, std::optional<OptimizerName>(OptimizerName::muon));
  EXPECT_EQ(config_hash(back), config_hash(muon));

  EXPECT_EQ(error_of("run.yaml", {"optim.name=lion"}), "optim.name: 'lion' is not one of adamw, sgd, muon");
  EXPECT_EQ(error_of("run.yaml", {"optim.momentum=0.9"}),
            "optim.momentum: used by sgd and muon only, not by optim.name adamw (AdamW's is optim.beta1)");
  EXPECT_EQ(error_of("run.yaml", {"optim.name=sgd", "optim.muon_lr=0.02"}),
            "optim.muon_lr: used by muon only, not by optim.name sgd");
  EXPECT_EQ(error_of("run.yaml", {"optim.name=sgd", "optim.momentum=1"}), "optim.momentum: must lie in [0, 1), got 1.0");
  EXPECT_EQ(error_of("run.yaml", {"optim.name=sgd", "optim.momentum=0", "optim.nesterov=true"}),
            "optim.nesterov: Nesterov momentum needs optim.momentum > 0");
  EXPECT_EQ(error_of("run.yaml", {"optim.name=muon", "optim.muon_lr=0"}), "optim.muon_lr: must be positive");
  EXPECT_EQ(error_of("run.yaml", {"optim.name=muon", "optim.muon_lr=.inf"}),
            "optim.muon_lr: must be a finite number, got .inf");
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

// The two seeds (docs/config.md, "Seeds"): unset, a config means what it always did, with the hash
// the build before them printed for run.yaml (d78697878743a01f; 8c40ed1cd438cbfb with seed=9);
// set to seed, they are no change; otherwise each drives its own use and the hash.
TEST_F(ConfigTest, InitAndDataSeedsDefaultToSeedAndKeepOldHashes) {
  const auto plain = load_run_config(dir_ / "run.yaml");
  EXPECT_EQ(config_hash(plain), "d78697878743a01f");
  EXPECT_EQ(config_hash(load_run_config(dir_ / "run.yaml", {"seed=9"})), "8c40ed1cd438cbfb");
  EXPECT_FALSE(plain.init_seed.has_value());
  EXPECT_EQ(plain.effective_init_seed(), 5u);
  EXPECT_EQ(plain.effective_data_seed(), 5u);
  EXPECT_EQ(to_yaml(plain).find("_seed"), std::string::npos) << "unset seeds are not written";
  const auto same = load_run_config(dir_ / "run.yaml", {"init_seed=5", "data_seed=5"});
  EXPECT_EQ(config_hash(same), config_hash(plain));
  EXPECT_FALSE(same.init_seed.has_value());

  const auto init = load_run_config(dir_ / "run.yaml", {"init_seed=1005"});
  EXPECT_EQ(init.effective_init_seed(), 1005u);
  EXPECT_EQ(init.effective_data_seed(), 5u);
  EXPECT_NE(config_hash(init), config_hash(plain));
  EXPECT_EQ(differing_keys(plain, init), (std::vector<std::string>{"init_seed"}));
  EXPECT_EQ(differing_keys(init, plain), (std::vector<std::string>{"init_seed"}));
  const auto data = load_run_config(dir_ / "run.yaml", {"data_seed=6"});
  EXPECT_EQ(data.effective_init_seed(), 5u);
  EXPECT_EQ(data.effective_data_seed(), 6u);
  EXPECT_NE(config_hash(data), config_hash(init));
  // Written and read back; null unsets what an included file set.
  const auto back = run_config_from_json(to_json(init));
  EXPECT_EQ(back.init_seed, std::optional<uint64_t>(1005));
  EXPECT_EQ(config_hash(back), config_hash(init));
  EXPECT_NE(to_yaml(init).find("init_seed: 1005"), std::string::npos);
  write("seeded.yaml", "include: [run.yaml]\ninit_seed: 77\n");
  EXPECT_EQ(load_run_config(dir_ / "seeded.yaml").effective_init_seed(), 77u);
  EXPECT_FALSE(load_run_config(dir_ / "seeded.yaml", {"init_seed=null"}).init_seed.has_value());
  EXPECT_EQ(error_of("run.yaml", {"init_seed=-1"}), "init_seed: expected an integer, got '-1'");
  EXPECT_EQ(error_of("run.yaml", {"data_seed=x"}), "data_seed: expected an integer, got 'x'");
}

// eval.tasks (docs/downstream.md) came after runs existed: empty, it is neither written nor hashed,
// so those runs' config.yaml and hash stay what they were; set, it round-trips, stays outside the
// hash (it scores, it does not train) and may change on resume like track.*.
TEST_F(ConfigTest, EvalTasksAreAnObservationListAbsentWhenEmpty) {
  const auto plain = load_run_config(dir_ / "run.yaml");
  EXPECT_FALSE(to_json(plain)["eval"].contains("tasks"));
  EXPECT_EQ(to_yaml(plain).find("tasks"), std::string::npos);
  const auto tasked = load_run_config(dir_ / "run.yaml", {"eval.tasks=[data/copa.jsonl, /t/piqa.jsonl]"});
  EXPECT_EQ(tasked.eval.tasks, (std::vector<std::string>{"data/copa.jsonl", "/t/piqa.jsonl"}));
  EXPECT_EQ(config_hash(plain), config_hash(tasked));
  const auto reread = write("reread.yaml", to_yaml(tasked));
  EXPECT_EQ(load_run_config(reread).eval.tasks, tasked.eval.tasks);
  EXPECT_EQ(to_yaml(load_run_config(reread)), to_yaml(tasked));
  EXPECT_EQ(differing_keys(plain, tasked), (std::vector<std::string>{"eval.tasks.0", "eval.tasks.1"}));
  for (const auto& key : differing_keys(plain, tasked)) EXPECT_TRUE(is_observation_key(key)) << key;
  EXPECT_TRUE(is_observation_key("eval.tasks"));
  EXPECT_FALSE(is_observation_key("eval.every"));
  EXPECT_FALSE(is_observation_key("eval.tasksx"));
  EXPECT_EQ(error_of("run.yaml", {"eval.tasks=a.jsonl"}).rfind("eval.tasks: expected a list of strings", 0), 0u);
  EXPECT_EQ(error_of("run.yaml", {"eval.tasks=[[a]]"}).rfind("eval.tasks[0]: expected", 0), 0u);
  EXPECT_EQ(error_of("run.yaml", {"eval.tasks=[a/copa.jsonl, b/copa.jsonl]"}),
            "eval.tasks: 'a/copa.jsonl' and 'b/copa.jsonl' are both task 'copa' (a task is named by its file stem): "
            "rename one");
  EXPECT_EQ(error_of("run.yaml", {"eval.tasks=['']"}), "eval.tasks[0]: empty path (a task file, docs/downstream.md)");
  EXPECT_NE(error_of("run.yaml", {"eval.tasks=[\"a\\x01.jsonl\"]"}).find("eval.tasks[0]"), std::string::npos);
}

TEST_F(ConfigTest, ImpossibleValuesNameTheKey) {
  EXPECT_NE(error_of("run.yaml", {"model.arm=sinklogit"}).find("unknown attention arm 'sinklogit'"), std::string::npos);
  EXPECT_EQ(error_of("run.yaml", {"model.d_model=33"}), "model.d_model = 33 is not divisible by model.n_head = 2");
  EXPECT_EQ(error_of("run.yaml", {"train.seq_len=65"}), "train.seq_len = 65 exceeds model.block_size = 64");
  EXPECT_EQ(error_of("run.yaml", {"train.tokens_per_step=100"}),
            "train.tokens_per_step = 100 must be a multiple of train.batch_size * train.seq_len = 64");
  EXPECT_EQ(error_of("run.yaml", {"attention.backend=fast"}),
            "attention.backend: 'fast' is not one of auto, fused, reference, sdpa, flash, cudnn");
  EXPECT_NE(error_of("run.yaml", {"attention.backend=sdpa"}).find("model.arm 'combo2'"), std::string::npos);
  EXPECT_EQ(error_of("run.yaml", {"optim.beta2=1"}), "optim.beta2: must lie in [0, 1)");
  EXPECT_EQ(error_of("run.yaml", {"model.routing_gate=sparse"}),
            "model.routing_gate: 'sparse' is not one of none, norm, projection");
  EXPECT_EQ(error_of("tier.yaml"), "data.train: required (a glob of llm.c-format train shards)");
}

TEST_F(ConfigTest, FileErrorsNameTheFile) {
  EXPECT_NE(error_of("missing.yaml").find("missing.yaml: does not exist"), std::string::npos);
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

// Every key of `cfg` (full dotted path) whose value is of the JSON type `is`.
std::vector<std::string> keys_where(const RunConfig& cfg, bool (nlohmann::json::*is)() const noexcept) {
  std::vector<std::string> keys;
  const auto flat = to_json(cfg).flatten();  // items() refers to it: it must outlive the loop
  for (const auto& [pointer, value] : flat.items()) {
    if (!(value.*is)()) continue;
    std::string key = pointer.substr(1);
    std::replace(key.begin(), key.end(), '/', '.');
    keys.push_back(key);
  }
  return keys;
}

TEST_F(ConfigTest, DuplicateKeysAreRefusedNamingBothLines) {
  write("dup_lr.yaml", "include: [run.yaml]\noptim:\n  lr: 1.0e-3\n  lr: 3.0e-3\n");
  EXPECT_EQ(error_of("dup_lr.yaml"), (dir_ / "dup_lr.yaml").string() + ":4: optim.lr: duplicate key (first at line 3)");
  // In an included file, the included file is named; in flow style too.
  write("dup_backend.yaml", "attention: {backend: fused, backend: reference}\n");
  write("includes_dup.yaml", "include: [run.yaml, dup_backend.yaml]\n");
  EXPECT_EQ(error_of("includes_dup.yaml"),
            (dir_ / "dup_backend.yaml").string() + ":1: attention.backend: duplicate key (first at line 1)");
  write("dup_top.yaml", "include: [run.yaml]\nseed: 1\nout_dir: x\nseed: 2\n");
  EXPECT_EQ(error_of("dup_top.yaml"), (dir_ / "dup_top.yaml").string() + ":4: seed: duplicate key (first at line 2)");
  write("dup_section.yaml", "include: [run.yaml]\noptim: {lr: 0.1}\ntrain: {seq_len: 16}\noptim: {eps: 1.0e-9}\n");
  EXPECT_NE(error_of("dup_section.yaml").find(":4: optim: duplicate key (first at line 2)"), std::string::npos);
  EXPECT_EQ(error_of("run.yaml", {"model={arm: baseline, arm: combo2}"}), "--set model: model.arm: duplicate key");
  // A key set in a file and again in the file that includes it is the documented override, not a duplicate.
  EXPECT_EQ(load_run_config(dir_ / "run.yaml").train.seq_len, 32);
}

TEST_F(ConfigTest, KeysMustBeNamesAndAliasBombsAreRefused) {
  write("list_key.yaml", "include: [run.yaml]\n? [a, b]\n: 1\n");
  EXPECT_NE(error_of("list_key.yaml").find("a key must be a plain name, got a list"), std::string::npos);
  write("bad_include.yaml", "include: [[run.yaml]]\n");
  EXPECT_NE(error_of("bad_include.yaml").find("include: expected file names, got a list"), std::string::npos);
  write("cycle.yaml", "include: [run.yaml]\ntier: &a [*a]\n");  // an alias inside itself
  EXPECT_NE(error_of("cycle.yaml").find("nested deeper than 32 levels"), std::string::npos);
  std::string bomb = "include: [run.yaml]\nx0: &x0 [a, a, a, a, a, a, a, a, a, a]\n";
  for (int i = 1; i < 9; ++i) {
    bomb += "x" + std::to_string(i) + ": &x" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", *x" : "*x") + std::to_string(i - 1);
    bomb += "]\n";
  }
  write("bomb.yaml", bomb);  // 10^9 values once expanded
  EXPECT_NE(error_of("bomb.yaml").find("more than 100000 values once aliases are expanded"), std::string::npos);
  EXPECT_NE(error_of(".").find(": is a directory, not a regular file"), std::string::npos);
  write("endless.yaml", "include: [/dev/zero]\n");  // refused by what it is, never read
  EXPECT_NE(error_of("endless.yaml").find("/dev/zero: is a character device, not a regular file"), std::string::npos);
  write("huge.yaml", "x: " + std::string(17 << 20, 'a') + "\n");  // over the 16 MiB cap
  EXPECT_NE(error_of("huge.yaml").find("huge.yaml: is 17825796 bytes, more than the 16777216"), std::string::npos);
}

TEST_F(ConfigTest, SweepFilesRefuseDuplicateKeysAndOctal) {
  write("sweep_dup.yaml", "base: run.yaml\nout: o\ngrid:\n  seed: [1]\ngrid:\n  seed: [2, 3]\n");
  try {
    load_sweep(dir_ / "sweep_dup.yaml");
    ADD_FAILURE() << "a sweep with two grid: keys was accepted";
  } catch (const SweepError& e) {
    EXPECT_EQ(std::string(e.what()), (dir_ / "sweep_dup.yaml").string() + ":5: grid: duplicate key (first at line 3)");
  }
  write("sweep_octal.yaml", "base: run.yaml\nout: o\nthreads_per_run: 010\ngrid:\n  seed: [1]\n");
  EXPECT_EQ(load_sweep(dir_ / "sweep_octal.yaml").threads_per_run, 10);
}

TEST_F(ConfigTest, IntegersAreYaml12DecimalNeverOctal) {
  const auto cfg = load_run_config(dir_ / "run.yaml", {"seed=010", "train.max_steps=0100", "eval.every=08"});
  EXPECT_EQ(cfg.seed, 10u);  // YAML 1.1 / yaml-cpp: octal 8
  EXPECT_EQ(cfg.train.max_steps, 100);
  EXPECT_EQ(cfg.eval.every, 8);
  write("zeros.yaml", "include: [run.yaml]\nseed: 0007\ntrain: {max_steps: +012}\n");
  const auto from_file = load_run_config(dir_ / "zeros.yaml");
  EXPECT_EQ(from_file.seed, 7u);
  EXPECT_EQ(from_file.train.max_steps, 12);
  // YAML 1.2's explicit bases stay available.
  const auto based = load_run_config(dir_ / "run.yaml", {"seed=0o10", "train.max_steps=0x10"});
  EXPECT_EQ(based.seed, 8u);
  EXPECT_EQ(based.train.max_steps, 16);
  EXPECT_EQ(load_run_config(dir_ / "run.yaml", {"seed=18446744073709551615"}).seed, 18446744073709551615u);
  EXPECT_EQ(error_of("run.yaml", {"seed=18446744073709551616"}), "seed: expected an integer, got '18446744073709551616' (out of range)");
  EXPECT_EQ(error_of("run.yaml", {"train.max_steps=9223372036854775808"}),
            "train.max_steps: expected an integer, got '9223372036854775808' (out of range)");
  EXPECT_EQ(error_of("run.yaml", {"train.max_steps=1e3"}), "train.max_steps: expected an integer, got '1e3'");
  EXPECT_EQ(error_of("run.yaml", {"train.max_steps=0x"}), "train.max_steps: expected an integer, got '0x'");
  EXPECT_EQ(error_of("run.yaml", {"train.max_steps=-0x10"}), "train.max_steps: expected an integer, got '-0x10'");
  EXPECT_EQ(error_of("run.yaml", {"train.max_steps=-9223372036854775808"}), "train.token_budget / train.max_steps: must be >= 0");
}

TEST_F(ConfigTest, EveryFloatKeyMustBeFinite) {
  const auto base = load_run_config(dir_ / "run.yaml");
  const auto float_keys = keys_where(base, &nlohmann::json::is_number_float);
  ASSERT_GE(float_keys.size(), 9u);  // seven optim.* and two track.activations.massive_*
  for (const auto& key : float_keys) {
    for (const std::string value : {".inf", "-.inf", ".nan"}) {
      const auto error = error_of("run.yaml", {key + "=" + value});
      EXPECT_EQ(error.rfind(key + ": must be a finite number, got ", 0), 0u) << key << "=" << value << ": " << error;
    }
  }
  RunConfig built = base;  // a config made in code goes through validate() too
  built.optim.grad_clip = std::numeric_limits<double>::infinity();
  EXPECT_THROW(validate(built), ConfigError);
}

TEST_F(ConfigTest, EveryStringMustBeWritableByEveryWriter) {
  const auto base = load_run_config(dir_ / "run.yaml");
  for (const auto& key : keys_where(base, &nlohmann::json::is_string)) {
    // Raw bytes pass through yaml-cpp; a YAML escape makes the control character.
    for (const std::string bad : {std::string("a\xff") + "b", std::string("\xc3"), std::string("\"a\\x01\""),
                                  std::string("\"a\\0b\"")}) {
      const auto error = error_of("run.yaml", {key + "=" + bad});
      EXPECT_EQ(error.rfind(key + ": ", 0), 0u) << key << ": " << error;
      EXPECT_TRUE(error.find("not valid UTF-8") != std::string::npos || error.find("control character") != std::string::npos)
          << error;
      EXPECT_NO_THROW((void)nlohmann::json(error).dump());  // the message itself can be written
    }
  }
  // Valid UTF-8 beyond ASCII is accepted and written by every writer.
  const auto cfg = load_run_config(dir_ / "run.yaml", {"tier=m\xc3\xa9so"});
  EXPECT_EQ(nlohmann::json::parse(to_json(cfg).dump())["tier"], "m\xc3\xa9so");
  write("resolved.yaml", to_yaml(cfg));
  EXPECT_EQ(load_run_config(dir_ / "resolved.yaml").tier, "m\xc3\xa9so");
}

TEST_F(ConfigTest, ProductsOfSizesAreCheckedForOverflow) {
  EXPECT_EQ(error_of("run.yaml", {"train.batch_size=4294967296", "train.seq_len=4294967296", "model.block_size=4294967296",
                                  "train.tokens_per_step=0"}),
            "train.batch_size * train.seq_len = 4294967296 * 4294967296 overflows a 64-bit count");
  // 2^63 - 1 tokens of 64 a step round up to 2^57 steps: 2^63 tokens, one more than int64 holds.
  EXPECT_EQ(error_of("run.yaml", {"train.token_budget=9223372036854775807"}),
            "train.token_budget = 9223372036854775807 (144115188075855872 steps) of train.tokens_per_step = 64 tokens: "
            "the run's token count overflows a 64-bit count");
  EXPECT_EQ(error_of("run.yaml", {"train.max_steps=9223372036854775807"}),
            "train.max_steps = 9223372036854775807 of train.tokens_per_step = 64 tokens: the run's token count overflows "
            "a 64-bit count");
  // At the edge it fits: one token a step, 2^63 - 1 of them.
  const auto edge = load_run_config(dir_ / "run.yaml", {"train.batch_size=1", "train.seq_len=1", "train.token_budget=9223372036854775807"});
  EXPECT_EQ(edge.total_steps(), std::numeric_limits<int64_t>::max());
  EXPECT_NE(error_of("run.yaml", {"model.d_model=1073741824", "model.n_head=2"})
                .find("model.n_layer = 3, model.d_model = 1073741824, model.vocab_size = 100, model.block_size = 64: about "),
            std::string::npos);
  EXPECT_NE(error_of("run.yaml", {"model.vocab_size=9223372036854775807"}).find("more than any machine holds"), std::string::npos);
  EXPECT_NE(error_of("run.yaml", {"model.block_size=9223372036854775807"}).find("more than any machine holds"), std::string::npos);
  EXPECT_NE(error_of("run.yaml", {"checkpoint.log_spaced_until=4611686018427387904"}).find("must be below 2^62"), std::string::npos);
  EXPECT_EQ(error_of("run.yaml", {"train.threads=4294967297"}), "train.threads: must be at most 1024");
}

TEST_F(ConfigTest, MemoryFloorIsCheckedAgainstTheMachine) {
  const auto cfg = load_run_config(dir_ / "run.yaml", {"model.arm=baseline"});
  // Closed form (docs/config.md): per block 12 d^2 + 13 d, ln_f 2 d, wte 128 x d (100 padded to 64s),
  // wpe 64 x d; d = 32, 3 blocks.
  const double params = 3 * (12 * 32 * 32 + 13 * 32) + 2 * 32 + 128 * 32 + 64 * 32;
  const auto floor = memory_floor(cfg);
  EXPECT_EQ(floor.weights, 16 * params);
  EXPECT_EQ(floor.logits, 2.0 * 2 * 32 * 128);  // batch_size 2, seq_len 32, padded vocab 128
  EXPECT_NO_THROW(check_fits_memory(cfg, floor.total(), "test"));
  try {
    check_fits_memory(cfg, floor.total() - 1, "test");
    ADD_FAILURE() << "a config one byte over the machine was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("model.n_layer, model.d_model, model.vocab_size, model.block_size: ", 0), 0u) << e.what();
  }
  const auto wide = load_run_config(dir_ / "run.yaml", {"train.batch_size=16777216"});  // 2^24 sequences
  try {
    check_fits_memory(wide, 64.0 * (1 << 30), "cpu");
    ADD_FAILURE() << "128 GiB of logits fit 64 GiB";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("train.batch_size, train.seq_len, model.vocab_size: a training step needs at least 128.0 GiB", 0), 0u) << msg;
    EXPECT_NE(msg.find("but cpu has 64.0 GiB; lower train.batch_size"), std::string::npos) << msg;
  }
}

TEST_F(ConfigTest, WarmupNotShorterThanTheRunIsWarnedAndRecorded) {
  const auto short_run = load_run_config(dir_ / "run.yaml", {"optim.warmup_steps=2", "train.max_steps=1", "optim.lr=0.004"});
  const auto warnings = config_warnings(short_run);
  ASSERT_EQ(warnings.size(), 1u);
  // The one step runs at lr * 1 / 2 (lr_schedule.h's warm-up).
  EXPECT_EQ(warnings[0], "optim.warmup_steps = 2 is not shorter than the run's 1 steps (train.max_steps): the learning "
                         "rate only rises, ending at 0.002 (optim.lr = 0.004) with no cosine decay");
  const auto yaml = to_yaml(short_run);
  EXPECT_EQ(yaml.rfind("# warning: " + warnings[0] + "\n", 0), 0u) << yaml;
  write("resolved.yaml", yaml);
  EXPECT_TRUE(differing_keys(short_run, load_run_config(dir_ / "resolved.yaml")).empty());
  // From the token budget: 3200 tokens of 64 are 50 steps; a warm-up of 50 never decays.
  EXPECT_EQ(config_warnings(load_run_config(dir_ / "run.yaml", {"optim.warmup_steps=50"})).size(), 1u);
  EXPECT_TRUE(config_warnings(load_run_config(dir_ / "run.yaml", {"optim.warmup_steps=49"})).empty());
  EXPECT_TRUE(config_warnings(RunConfig{}).empty());  // no steps yet: nothing to compare
}

TEST_F(ConfigTest, ValTokensBelowOneSequenceNamesBothKeys) {
  EXPECT_EQ(error_of("run.yaml", {"data.val_tokens=32"}),
            "data.val_tokens = 32 is less than one validation sequence of train.seq_len + 1 = 33 tokens");
  EXPECT_EQ(load_run_config(dir_ / "run.yaml", {"data.val_tokens=33"}).data.val_tokens, 33);
}

TEST_F(ConfigTest, FloatsAreWrittenInShortestRoundTripForm) {
  const auto cfg = load_run_config(dir_ / "run.yaml", {"optim.lr=3e-4", "optim.eps=1e-8", "optim.grad_clip=1",
                                                       "optim.beta2=0.95", "track.activations.massive_ratio=1e16"});
  const auto yaml = to_yaml(cfg);
  for (const std::string line : {"  lr: 0.0003\n", "  eps: 1.0e-08\n", "  grad_clip: 1.0\n", "  beta2: 0.95\n",
                                 "    massive_ratio: 1.0e+16\n"})
    EXPECT_NE(yaml.find(line), std::string::npos) << "no '" << line << "' in\n" << yaml;
  // Awkward values come back bit for bit.
  for (const double lr : {0.1 + 0.2, 1.0 / 3, 6.000000000000001e-4, 5e-324, 1.7976931348623157e308}) {
    auto c = cfg;
    c.optim.lr = lr;
    write("resolved.yaml", to_yaml(c));
    EXPECT_EQ(load_run_config(dir_ / "resolved.yaml").optim.lr, lr);
  }
}

}  // namespace
}  // namespace attnlab

namespace attnlab {
namespace {

// Sliding windows (docs/windows.md, "Config keys"): refused values name the key; one spelling per
// model (the pattern expanded, windows that hide nothing dropped); unset keys leave bytes and hash.
TEST_F(ConfigTest, WindowKeysAreCheckedAndNormalised) {
  const auto plain = load_run_config(dir_ / "run.yaml");
  EXPECT_EQ(config_hash(plain), "d78697878743a01f") << "a config without window keys keeps its hash";
  EXPECT_EQ(to_yaml(plain).find("window"), std::string::npos);

  EXPECT_EQ(error_of("run.yaml", {"model.window=0"}), "model.window: must be at least 1 (null: no window), got 0");
  EXPECT_EQ(error_of("run.yaml", {"model.window=32.0"}).rfind("model.window: expected an integer", 0), 0u);
  EXPECT_EQ(error_of("run.yaml", {"model.window=8", "model.window_pattern=LgG"}),
            "model.window_pattern: 'LgG' has 'g' at index 1; only L (local) and G (global)");
  EXPECT_EQ(error_of("run.yaml", {"model.window=8", "model.window_pattern=''"}),
            "model.window_pattern: empty; give L (local) and G (global) letters");
  EXPECT_EQ(error_of("run.yaml", {"model.window_pattern=LG"}), "model.window_pattern: needs model.window");
  EXPECT_EQ(error_of("run.yaml", {"model.window_keep_first=2"}), "model.window_keep_first: needs model.window");
  EXPECT_EQ(error_of("run.yaml", {"model.window=8", "model.window_keep_first=-1"}),
            "model.window_keep_first: must be >= 0, got -1");
  EXPECT_NE(error_of("run.yaml", {"model.window=8", "attention.backend=cudnn"}).find("has no sliding window"),
            std::string::npos);
  EXPECT_NE(error_of("run.yaml", {"model.window=8", "model.window_keep_first=1", "attention.backend=flash",
                                  "train.device=cuda"})
                .find("model.window_keep_first = 1"),
            std::string::npos);
  EXPECT_EQ(error_of("run.yaml", {"model.window=8", "model.window_keep_first=1", "attention.backend=flash"}),
            "no error") << "train.device: auto may land on the CPU, where flash keeps first positions";
  EXPECT_EQ(error_of("run.yaml", {"model.window=8", "model.window_keep_first=1", "attention.backend=flash",
                                  "train.device=cpu"}),
            "no error") << "flash on CPU keeps first positions";

  // Expanded to one letter per block (n_layer = 3), keep_first written; the window is on the model.
  const auto lg = load_run_config(dir_ / "run.yaml", {"model.window=8", "model.window_pattern=LG"});
  EXPECT_EQ(lg.model.window_pattern, std::optional<std::string>("LGL"));
  EXPECT_EQ(lg.model.window_keep_first, std::optional<int64_t>(0));
  EXPECT_TRUE(lg.model.layer_is_local(0) && !lg.model.layer_is_local(1) && lg.model.layer_is_local(2));
  EXPECT_EQ(lg.model.layer_window(2).window, 8);
  EXPECT_EQ(lg.model.layer_window(1).window, 0);
  EXPECT_NE(config_hash(lg), config_hash(plain));
  const auto lgl = load_run_config(dir_ / "run.yaml", {"model.window=8", "model.window_pattern=LGL"});
  EXPECT_EQ(config_hash(lgl), config_hash(lg)) << "one model, one spelling, one hash";
  const auto back = run_config_from_json(to_json(lg));
  EXPECT_EQ(config_hash(back), config_hash(lg));
  EXPECT_NE(to_yaml(lg).find("window_pattern: LGL"), std::string::npos);

  // Windows that hide nothing are no window: the full-attention config and its hash.
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"model.window=8", "model.window_pattern=G"},
        std::vector<std::string>{"model.window=64"},                                 // W >= block_size
        std::vector<std::string>{"model.window=60", "model.window_keep_first=4"}}) {  // W + n >= block_size
    const auto none = load_run_config(dir_ / "run.yaml", sets);
    EXPECT_FALSE(none.model.window.has_value()) << sets[0];
    EXPECT_EQ(config_hash(none), config_hash(plain)) << sets[0];
  }
  // W + n past int64: no window, not an overflow into a negative sum.
  const std::string max = std::to_string(std::numeric_limits<int64_t>::max());
  for (const std::vector<std::string>& sets : {std::vector<std::string>{"model.window=" + max, "model.window_keep_first=1"},
                                               std::vector<std::string>{"model.window=1", "model.window_keep_first=" + max}}) {
    EXPECT_EQ(config_hash(load_run_config(dir_ / "run.yaml", sets)), config_hash(plain)) << sets[0] << " " << sets[1];
  }
  EXPECT_EQ(error_of("run.yaml", {"model.window=8", "model.window_pattern=L\xc3\xa9"}),
            "model.window_pattern: 'L\xc3\xa9' has byte 0xC3 at index 1; only L (local) and G (global)");
  EXPECT_NE(error_of("run.yaml", {"model.window=8", "model.window_pattern=" + std::string(100, 'L') + "x"})
                .find("... (101 letters)"),
            std::string::npos);
  // sink_token has one position more: W + n = 64 still hides key 0 from its last query.
  const auto token = load_run_config(dir_ / "run.yaml", {"model.arm=sink_token", "model.window=64"});
  EXPECT_EQ(token.model.window, std::optional<int64_t>(64));
  // A pattern longer than the depth: warned (logged as the config is read, before it is expanded).
  ModelConfig long_pattern;
  long_pattern.window = 8, long_pattern.window_pattern = "LLLG";
  EXPECT_EQ(window_pattern_warning(long_pattern),
            "model.window_pattern: 'LLLG' is longer than model.n_layer = 2; the layers use 'LL'");
  EXPECT_EQ(window_pattern_warning(lg.model), "");
  // n >= W is a model (each query sees itself and the first n positions), not refused.
  EXPECT_EQ(load_run_config(dir_ / "run.yaml", {"model.window=1", "model.window_keep_first=4"}).model.window,
            std::optional<int64_t>(1));
}

}  // namespace
}  // namespace attnlab

namespace attnlab {
namespace {

// data.sampling (docs/data.md, "Document-aligned windows"): unset and `random` are today's sampling,
// one spelling with no key, so configs keep their bytes and hash; `document` is written, hashed and
// may not change on resume; anything else is refused naming the key and the names.
TEST_F(ConfigTest, DataSamplingIsAnOptionalNameInTheHashWhenSet) {
  const auto plain = load_run_config(dir_ / "run.yaml");
  EXPECT_FALSE(plain.data.sampling.has_value());
  EXPECT_EQ(config_hash(plain), "d78697878743a01f") << "a config without data.sampling keeps its hash";
  EXPECT_EQ(to_yaml(plain).find("sampling"), std::string::npos);
  const auto random = load_run_config(dir_ / "run.yaml", {"data.sampling=random"});
  EXPECT_FALSE(random.data.sampling.has_value()) << "random is the default: no key";
  EXPECT_EQ(to_yaml(random), to_yaml(plain));
  EXPECT_EQ(config_hash(random), config_hash(plain));

  const auto doc = load_run_config(dir_ / "run.yaml", {"data.sampling=document"});
  ASSERT_TRUE(doc.data.sampling.has_value());
  EXPECT_EQ(*doc.data.sampling, WindowSampling::document);
  EXPECT_EQ(to_json(doc)["data"]["sampling"], "document");
  EXPECT_NE(config_hash(doc), config_hash(plain));
  const auto reread = load_run_config(write("doc.yaml", to_yaml(doc)));
  EXPECT_EQ(to_yaml(reread), to_yaml(doc));
  EXPECT_EQ(config_hash(reread), config_hash(doc));
  EXPECT_EQ(differing_keys(plain, doc), (std::vector<std::string>{"data.sampling"}));
  EXPECT_FALSE(is_observation_key("data.sampling"));
  EXPECT_FALSE(load_run_config(write("unset.yaml", to_yaml(doc)), {"data.sampling=null"}).data.sampling);

  EXPECT_EQ(error_of("run.yaml", {"data.sampling=doc"}), "data.sampling: 'doc' is not one of random, document");
  EXPECT_EQ(error_of("run.yaml", {"data.sampling=[document]"}).rfind("data.sampling: expected a string", 0), 0u);
  auto cast = doc;
  cast.data.sampling = static_cast<WindowSampling>(9);  // a config built in code
  try {
    validate(cast);
    ADD_FAILURE() << "validated";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "data.sampling: 9 is not one of random, document");
  }
}

// eval.trigger_tokens: an observation list (outside the hash, free on resume), not written when
// empty, each id inside model.vocab_size (100 here).
TEST_F(ConfigTest, TriggerTokensAreAnObservationListOfIdsInTheVocabulary) {
  const auto plain = load_run_config(dir_ / "run.yaml");
  EXPECT_FALSE(to_json(plain)["eval"].contains("trigger_tokens"));
  EXPECT_EQ(to_yaml(plain).find("trigger"), std::string::npos);
  const auto split = load_run_config(dir_ / "run.yaml", {"eval.trigger_tokens=[0, 1, 99]"});
  EXPECT_EQ(split.eval.trigger_tokens, (std::vector<int64_t>{0, 1, 99}));
  EXPECT_EQ(config_hash(split), config_hash(plain));
  EXPECT_EQ(to_yaml(load_run_config(write("split.yaml", to_yaml(split)))), to_yaml(split));
  EXPECT_EQ(differing_keys(plain, split),
            (std::vector<std::string>{"eval.trigger_tokens.0", "eval.trigger_tokens.1", "eval.trigger_tokens.2"}));
  for (const auto& key : differing_keys(plain, split)) EXPECT_TRUE(is_observation_key(key)) << key;
  EXPECT_TRUE(is_observation_key("eval.trigger_tokens"));
  EXPECT_FALSE(is_observation_key("eval.trigger_tokensx"));
  EXPECT_EQ(error_of("run.yaml", {"eval.trigger_tokens=[0, 100]"}),
            "eval.trigger_tokens[1]: token 100 is outside the vocabulary [0, 100) of model.vocab_size");
  EXPECT_EQ(error_of("run.yaml", {"eval.trigger_tokens=[-1]"}),
            "eval.trigger_tokens[0]: token -1 is outside the vocabulary [0, 100) of model.vocab_size");
  EXPECT_EQ(error_of("run.yaml", {"eval.trigger_tokens=3"}).rfind("eval.trigger_tokens: expected a list of integers", 0), 0u);
  EXPECT_EQ(error_of("run.yaml", {"eval.trigger_tokens=[a]"}), "eval.trigger_tokens[0]: expected an integer, got 'a'");
}

}  // namespace
}  // namespace attnlab
