// End to end: `attnlab probe`, `attnlab inject` and `attnlab report --probes --inject` through the
// real binary on tiny trained runs of every arm. The clean loss of inject is checked against `attnlab eval` on the same tokens.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attnlab/arm.h"
#include "attnlab/sweep.h"
#include "attnlab/trainer.h"
#include "e2e/cli.h"
#include "extra_arm.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::ShardSpec;

using testing::read;
using testing::run_cli;  // stdout and stderr both to the log

class ProbeE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    const fs::path d = tmp_->path();
    fs::create_directories(d / "data");
    fs::create_directories(d / "sweeps");
    std::vector<uint16_t> val(4096), train_tokens(40000);
    uint32_t x = 12345;
    for (auto* v : {&val, &train_tokens})
      for (auto& t : *v) t = uint16_t((x = x * 1103515245u + 12345u) >> 16) % 64;
    tmp_->write_shard("data/toy_val_000000.bin", ShardSpec{val});
    tmp_->write_shard("data/toy_train_000001.bin", ShardSpec{train_tokens});
    tmp_->write_text("data/tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 64})");
    fs::create_directories(d / "tiers");
    std::ofstream(d / "base.yaml") << "data: {train: '" << (d / "data/*_train_*.bin").string() << "', val: '"
                                   << (d / "data/*_val_*.bin").string() << "', val_tokens: 1024}\n"
                                   << "train: {batch_size: 4, seq_len: 16, tokens_per_step: 64, device: cpu}\n"
                                   << "optim: {lr: 0.01, warmup_steps: 2}\n";
    std::ofstream(d / "tiers/tiny.yaml")
        << "tier: tiny\nmodel: {n_layer: 2, n_head: 2, d_model: 32, block_size: 32, vocab_size: 64}\n";
    std::ofstream(d / "sweeps/toy.yaml")
        << "base: ../base.yaml\nout: " << (d / "out").string()
        << "\nset:\n  train.max_steps: 8\n  eval.every: 4\n  checkpoint.every: 4\n"
        << "grid:\n  tier: [tiny]\n  model.arm: [" << testing_extra::registry_arm_yaml_items() << "]\n  seed: [1]\n";
    for (const auto& run : expand_sweep(load_sweep(d / "sweeps/toy.yaml"))) ASSERT_EQ(train(run.resolved).status, TrainStatus::finished);
  }
  static void TearDownTestSuite() { delete tmp_; }
  static fs::path dir() { return tmp_->path(); }
  static fs::path run_dir(const std::string& arm) {
    for (const auto& e : fs::recursive_directory_iterator(dir() / "out"))
      if (e.path().filename() == "s1" && e.path().parent_path().filename() == arm) return e.path();
    return {};
  }
  static testing::TempDir* tmp_;
};
testing::TempDir* ProbeE2E::tmp_ = nullptr;

TEST_F(ProbeE2E, ProbeWritesProvenanceAndMatricesForEveryArm) {
  for (const auto& spec : all_arms()) {
    const std::string& arm = spec.name;
    const auto run = run_dir(arm);
    ASSERT_FALSE(run.empty()) << arm;
    ASSERT_EQ(run_cli({"probe", "--checkpoint", run.string(), "--sequences", "6", "--batch-size", "4"}, dir() / "p.log"), 0)
        << read(dir() / "p.log");
    const auto j = nlohmann::json::parse(read(run / "probes/probe.json"));
    EXPECT_EQ(j["provenance"]["arm"], arm);
    EXPECT_EQ(j["provenance"]["step"], 8);
    EXPECT_EQ(j["provenance"]["sequences"], 6);
    EXPECT_EQ(j["provenance"]["length"], 16);
    EXPECT_EQ(j["summary"]["model"]["phantom_mass"].is_number(), spec.sink != SinkKind::none) << arm;
    EXPECT_EQ(j["summary"]["model"]["gate_mean"].is_number(), spec.gate != GateKind::none) << arm;
    // Every arm has the extreme-token and outlier measures; without trigger tokens their masses are null.
    for (const char* m : {"first_key_chance", "value_drain", "residual_peak", "max_inf_norm", "kurtosis", "max_kurtosis"})
      EXPECT_TRUE(j["summary"]["model"][m].is_number()) << arm << " " << m;
    EXPECT_TRUE(j["summary"]["model"]["trigger_key_mass"].is_null()) << arm;
    EXPECT_TRUE(fs::exists(run / "probes/probe_layers.csv")) << arm;
    // The matrix CSV holds the JSON's per-head values, layer by layer.
    std::istringstream csv(read(run / "probes/probe_first_key_mass.csv"));
    std::string line;
    std::getline(csv, line);
    EXPECT_EQ(line, "layer,h0,h1");
    for (int l = 0; l < 2; ++l) {
      std::getline(csv, line);
      const double h1 = std::stod(line.substr(line.rfind(',') + 1));
      EXPECT_NEAR(h1, j["summary"]["layers"][l]["heads"]["first_key_mass"][1].get<double>(), 1e-5 * (1 + h1));
    }
    // first-key mass is an attention share; the model mean is the mean of the 4 heads.
    double sum = 0;
    for (const auto& layer : j["summary"]["layers"])
      for (const auto& v : layer["heads"]["first_key_mass"]) sum += v.get<double>();
    EXPECT_NEAR(j["summary"]["model"]["first_key_mass"].get<double>(), sum / 4, 1e-12);
  }
  // --seed draws windows with the training sampler instead of the first N sequences, and says so.
  const auto seeded = dir() / "seeded";
  ASSERT_EQ(run_cli({"probe", "--checkpoint", run_dir("baseline").string(), "--sequences", "4", "--seed", "5", "--out",
                     seeded.string()},
                    dir() / "p.log"),
            0)
      << read(dir() / "p.log");
  const auto j = nlohmann::json::parse(read(seeded / "probe.json"));
  EXPECT_EQ(j["provenance"]["probe_seed"], 5);
  EXPECT_NE(j["provenance"]["selection"].get<std::string>().find("seed 5"), std::string::npos);
  // --trigger-tokens: the trigger and other masses and their chances are numbers, the tokens are in the file.
  const auto triggered = dir() / "triggered";
  ASSERT_EQ(run_cli({"probe", "--checkpoint", run_dir("baseline").string(), "--sequences", "4", "--trigger-tokens",
                     "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", "--out", triggered.string()},
                    dir() / "p.log"),
            0)
      << read(dir() / "p.log");
  const auto t = nlohmann::json::parse(read(triggered / "probe.json"));
  EXPECT_EQ(t["trigger_tokens"].size(), 16u);  // a quarter of the 64 ids: some of the 64 queries carry one
  for (const char* m : {"trigger_key_mass", "trigger_key_chance", "other_key_mass", "other_key_chance"}) {
    ASSERT_TRUE(t["summary"]["model"][m].is_number()) << m;
    EXPECT_GT(t["summary"]["model"][m].get<double>(), 0.0) << m;
    EXPECT_LE(t["summary"]["model"][m].get<double>(), 1.0) << m;
  }
}

TEST_F(ProbeE2E, InjectCleanLossEqualsEvalAndEpsZeroChangesNothing) {
  const auto run = run_dir("proj_gate");
  ASSERT_EQ(run_cli({"eval", "--checkpoint", run.string(), "--data", (dir() / "data/*_val_*.bin").string(), "--tokens",
                     std::to_string(8 * 16 + 1), "--seq-len", "16"},
                    dir() / "e.log"),
            0)
      << read(dir() / "e.log");
  const auto eval_log = read(dir() / "e.log");
  const double eval_loss = std::stod(eval_log.substr(eval_log.find("val loss ") + 9));
  for (const std::string kind : {"structured", "gaussian", "gate_direction"}) {
    ASSERT_EQ(run_cli({"inject", "--checkpoint", run.string(), "--sequences", "8", "--kind", kind, "--cutoff", "p25",
                       "--eps", "0,0.8", "--per-block"},
                      dir() / "i.log"),
              0)
        << read(dir() / "i.log");
    const auto j = nlohmann::json::parse(read(run / ("probes/inject_" + kind + "_p25.json")));
    EXPECT_NEAR(j["result"]["clean_loss"].get<double>(), eval_loss, 2e-6) << kind;
    EXPECT_EQ(j["result"]["doses"][0]["loss"], j["result"]["clean_loss"]) << kind;
    EXPECT_NE(j["result"]["doses"][1]["loss"], j["result"]["clean_loss"]) << kind;
    EXPECT_EQ(j["result"]["per_layer"].size(), 2u);
  }
}

TEST_F(ProbeE2E, BadInjectionRequestsAreClearErrors) {
  const auto base = run_dir("baseline").string();
  EXPECT_EQ(run_cli({"inject", "--checkpoint", base, "--kind", "gate_direction"}, dir() / "x.log"), 1);
  EXPECT_NE(read(dir() / "x.log").find("needs a projection gate"), std::string::npos) << read(dir() / "x.log");
  EXPECT_EQ(run_cli({"inject", "--checkpoint", base, "--blocks", "0,7"}, dir() / "x.log"), 1);
  EXPECT_NE(read(dir() / "x.log").find("block 7 out of range"), std::string::npos) << read(dir() / "x.log");
  EXPECT_EQ(run_cli({"inject", "--checkpoint", base, "--blocks", "first"}, dir() / "x.log"), 1);
  EXPECT_NE(read(dir() / "x.log").find("'first'"), std::string::npos) << read(dir() / "x.log");
  EXPECT_EQ(run_cli({"inject", "--checkpoint", base, "--cutoff", "p10"}, dir() / "x.log"), 1);
  EXPECT_NE(read(dir() / "x.log").find("p10"), std::string::npos) << read(dir() / "x.log");
  EXPECT_EQ(run_cli({"probe", "--checkpoint", base, "--sequences", "1000"}, dir() / "x.log"), 1);
  EXPECT_NE(read(dir() / "x.log").find("--sequences"), std::string::npos) << read(dir() / "x.log");
  EXPECT_EQ(run_cli({"probe", "--checkpoint", (dir() / "nowhere").string()}, dir() / "x.log"), 1);
}

// The flags renamed so that each index has one name (--blocks: 0-based blocks; --residual(s): the
// residual state after block l) stop a script that still uses the old name, saying the new one.
TEST_F(ProbeE2E, RenamedLayerFlagsNameTheirReplacement) {
  const auto base = run_dir("baseline").string();
  const auto out = (dir() / "renamed").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"inject", "--checkpoint", base, "--layers", "0"}, "--layers was renamed --blocks"},
      {{"inject", "--checkpoint", base, "--per-layer"}, "--per-layer was renamed --per-block"},
      {{"ablate", "--checkpoint", base, "--layer", "1", "--channels", "top:1", "--out", out},
       "--layer was renamed --residual"},
      {{"retention", "--checkpoint", base, "--layers", "1", "--out", out}, "--layers was renamed --residuals"},
      {{"activations", "--runs", base, "--layer", "1", "--out", out}, "--layer was renamed --residual"}};
  for (const auto& [args, said] : cases) {
    EXPECT_NE(run_cli(args, dir() / "x.log"), 0) << args[0];
    EXPECT_NE(read(dir() / "x.log").find(said), std::string::npos) << read(dir() / "x.log");
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(ProbeE2E, ReportPrintsTheTablesAndReusesTheCache) {
  const auto out = (dir() / "out").string();
  const std::vector<std::string> args = {"report", out, "--probes", "--inject", "--compare-paper", "--probe-sequences", "4",
                                         "--inject-eps", "0.4,1.6"};
  ASSERT_EQ(run_cli(args, dir() / "r.log"), 0) << read(dir() / "r.log");
  const auto text = read(dir() / "r.log");
  EXPECT_NE(text.find("Trained-model measurements"), std::string::npos) << text;
  EXPECT_NE(text.find("gate_direction junk"), std::string::npos) << text;
  EXPECT_NE(text.find("*paper, 124m scale:* baseline"), std::string::npos) << text;
  const auto results = nlohmann::json::parse(read(dir() / "out/report/probes.json"));
  ASSERT_EQ(results["runs"].size(), all_arms().size());
  for (const auto& r : results["runs"]) {
    EXPECT_TRUE(r["probe"].is_object()) << r["name"];
    EXPECT_FALSE(r.contains("error")) << r["name"] << ": " << r["error"];
    const bool projection = arm_by_name(r["arm"].get<std::string>()).gate == GateKind::projection;
    EXPECT_EQ(r["inject"].size(), projection ? 6u : 4u) << r["name"];
  }
  const auto probe_file = run_dir("baseline") / "probes/probe.json";
  const auto before = fs::last_write_time(probe_file);
  ASSERT_EQ(run_cli(args, dir() / "r2.log"), 0) << read(dir() / "r2.log");
  EXPECT_EQ(fs::last_write_time(probe_file), before) << "the cached probe was recomputed";
  EXPECT_NE(read(dir() / "r2.log").find("0 computed, 7 reused"), std::string::npos) << read(dir() / "r2.log");
}

}  // namespace
}  // namespace attnlab
