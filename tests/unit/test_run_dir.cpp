// The run layer (docs/design.md, "The run directory"): typed files that refuse a damaged record, the
// one rule for resuming, claiming a directory, the atomic output writer, the metrics log, and
// open_trained()'s choice of tokens and provenance on a hand-made checkpoint.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/init.h"
#include "attnlab/param_groups.h"
#include "attnlab/run_dir.h"
#include "attnlab/run_state.h"
#include "attnlab/trained_run.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

FinalRecord sample_record() {
  FinalRecord r;
  r.final_val_loss = 4.25, r.best_val_loss = 4.125, r.steps = 30, r.tokens_seen = 3840;
  r.params = {1000, 600, 12};
  r.wall_time_s = 1.5, r.git_revision = "abc", r.config_hash = "0123456789abcdef";
  r.arm = "combo2", r.tier = "micro", r.device = "cpu", r.seed = 7;
  r.val_tokens = 4096, r.val_fingerprint = 18446744073709551557ULL;  // above 2^63: stays exact
  r.time_s = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  return r;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(FinalRecord, RoundTripsEveryKey) {
  auto r = sample_record();
  r.parent = ParentRecord{"runs/a/checkpoints/step_000010", 10};
  const auto j = to_json(r);
  EXPECT_EQ(j["val_fingerprint"].get<uint64_t>(), 18446744073709551557ULL);
  const auto back = final_record_from_json(j, "final.json");
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.parent->step, 10);
}

TEST(FinalRecord, AMissingOrMistypedKeyIsAnErrorNamingIt) {
  auto j = to_json(sample_record());
  j.erase("val_tokens");
  const auto missing = error_of([&] { final_record_from_json(j, "/r/final.json"); });
  EXPECT_NE(missing.find("/r/final.json"), std::string::npos) << missing;
  EXPECT_NE(missing.find("\"val_tokens\""), std::string::npos) << missing;
  j = to_json(sample_record());
  j["val_fingerprint"] = "fp";  // a string where the trainer writes a number
  EXPECT_NE(error_of([&] { final_record_from_json(j, "f"); }).find("val_fingerprint"), std::string::npos);
  j = to_json(sample_record());
  j["time_s"].erase("track");
  EXPECT_NE(error_of([&] { final_record_from_json(j, "f"); }).find("time_s.track"), std::string::npos);
}

TEST(ResumeRule, OnlyTheBudgetObservationAndPlaceMayChange) {
  RunConfig a;
  auto b = a;
  b.train.max_steps = 99, b.train.token_budget = 123, b.track.activations.every = 5, b.out_dir = "elsewhere";
  EXPECT_TRUE(resume_incompatible_keys(a, b).empty());
  b.optim.lr = 1.0, b.model.arm = "combo";
  EXPECT_EQ(resume_incompatible_keys(a, b), (std::vector<std::string>{"model.arm", "optim.lr"}));
}

RunConfig small_config(const std::string& data_dir) {
  RunConfig cfg;
  cfg.model.n_layer = 1, cfg.model.n_head = 2, cfg.model.d_model = 16, cfg.model.block_size = 8;
  cfg.model.vocab_size = 64;
  cfg.data.train = data_dir + "/t_train_*.bin", cfg.data.val = data_dir + "/t_val_*.bin";
  cfg.train.seq_len = 4, cfg.train.batch_size = 2, cfg.train.max_steps = 3;
  cfg.seed = 5, cfg.tier = "t";
  return cfg;
}

TEST(RunDir, ClaimWritesTheConfigAndRefusesAnotherRun) {
  TempDir tmp;
  const RunDir run(tmp.file("run"));
  auto cfg = small_config(tmp.path());
  EXPECT_FALSE(run.claimed());
  run.claim(cfg, false);
  EXPECT_TRUE(run.claimed());
  EXPECT_EQ(to_json(run.config()), to_json(cfg));
  cfg.train.max_steps = 6;  // a longer budget continues the run
  run.claim(cfg, false);
  EXPECT_EQ(run.config().train.max_steps, 6);
  cfg.optim.lr = 0.5;
  const auto foreign = error_of([&] { run.claim(cfg, false); });
  EXPECT_NE(foreign.find("optim.lr"), std::string::npos) << foreign;
  EXPECT_NE(error_of([&] { run.claim(cfg, true); }).find("already holds a run"), std::string::npos);
  tmp.write_text("notes.txt", "x");
  EXPECT_NE(error_of([&] { RunDir(tmp.path()).claim(cfg, false); }).find("not an attnlab run directory"),
            std::string::npos);
}

TEST(RunDir, FindsTheRunAPathLiesIn) {
  TempDir tmp;
  const fs::path run = tmp.file("sweep/a/s1");
  fs::create_directories(run / "checkpoints/step_000004");
  EXPECT_EQ(RunDir::containing(run)->path(), run);
  EXPECT_EQ(RunDir::containing(run / "checkpoints/step_000004")->path(), run);
  EXPECT_EQ(RunDir::containing(run / "checkpoints/step_000004/model.safetensors")->path(), run);
  EXPECT_FALSE(RunDir::containing(tmp.file("loose/model.safetensors")).has_value());
  std::ofstream(run / "config.yaml") << "seed: 1\n";
  EXPECT_EQ(find_run_dirs(tmp.file("sweep")), std::vector<fs::path>{run});
}

TEST(RunDir, ADamagedFinalRecordMakesTheRunPartialSayingWhy) {
  TempDir tmp;
  const RunDir run(tmp.file("run"));
  run.claim(small_config(tmp.path()), false);
  auto j = to_json(sample_record());
  j.erase("config_hash");
  std::ofstream(run.final_file()) << j.dump();
  const auto state = inspect_run(run.path());
  EXPECT_EQ(state.status, RunStatus::partial);
  EXPECT_NE(state.detail.find("config_hash"), std::string::npos) << state.detail;
  EXPECT_THROW(run.final_record(), FileError);
  std::ofstream(run.final_file()) << "{\"final_val_loss\": 4.";  // cut short
  EXPECT_EQ(inspect_run(run.path()).status, RunStatus::partial);
  std::ofstream(run.final_file()) << to_json(sample_record()).dump();
  EXPECT_EQ(inspect_run(run.path(), "0123456789abcdef").status, RunStatus::finished);
  EXPECT_EQ(inspect_run(run.path(), "ffff").status, RunStatus::stale);
}

TEST(Metrics, ReadsValidationPointsAndActivationRecordsAndSkipsACutLine) {
  TempDir tmp;
  ActivationCapture capture;
  LayerActivations a;
  a.layer = 0, a.peak.max_abs = 3.0, a.peak_sequence = 1, a.peak_position = 2;
  capture.layers.push_back(a);
  {
    MetricsLog log(tmp.file("metrics.jsonl"), -1);
    log.append({{"step", 1}, {"tokens", 8}, {"val_loss", nullptr}});
    log.append({{"step", 2}, {"tokens", 16}, {"val_loss", 4.5}});
    log.append({{"type", "activations"}, {"step", 2}, {"layers", layers_json(capture)}});
  }
  std::ofstream(tmp.file("metrics.jsonl"), std::ios::app) << "{\"step\": 3, \"val_lo";  // a crash mid-line
  const auto h = read_metrics(tmp.file("metrics.jsonl"));
  ASSERT_EQ(h.validation.size(), 1u);
  EXPECT_EQ(h.validation[0].step, 2);
  EXPECT_EQ(h.validation[0].val_loss, 4.5);
  ASSERT_EQ(h.activations.size(), 1u);
  EXPECT_EQ(h.activations[0].layers[0].peak.max_abs, 3.0);
  EXPECT_EQ(h.activations[0].layers[0].peak_position, 2);
  // Resuming at step 1 drops what came after it.
  { MetricsLog log(tmp.file("metrics.jsonl"), 1); }
  EXPECT_TRUE(read_metrics(tmp.file("metrics.jsonl")).validation.empty());
  std::ofstream(tmp.file("bad.jsonl")) << R"({"type": "activations", "step": 4, "layers": [{"layer": 0}]})" "\n";
  EXPECT_THROW(read_metrics(tmp.file("bad.jsonl")), FileError);
}

TEST(Outputs, EachFileIsWrittenWholeAndNothingIsLeftBehind) {
  TempDir tmp;
  write_outputs(tmp.file("out/deeper"), {{"a.json", "{}\n"}, {"b.csv", "x,y\n1,2\n"}});
  std::ifstream in(tmp.file("out/deeper/b.csv"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "x,y\n1,2\n");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.file("out/deeper"))) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.json", "b.csv"}));  // no temporaries
  tmp.write_text("blocker", "a file where a directory should be");
  const auto e = error_of([&] { write_outputs(tmp.file("blocker"), {{"a.json", "{}"}}); });
  EXPECT_NE(e.find("blocker"), std::string::npos) << e;
}

// A checkpoint of an untrained one-layer model and 41 validation tokens: open_trained's defaults come
// from the run's config, its provenance says so, and what it cannot default is a clear error.
class OpenTrained : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_.write_text("tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 64})");
    tmp_.write_shard("t_train_000.bin", {testing::iota_tokens(200, 0, 64)});
    tmp_.write_shard("t_val_000.bin", {testing::iota_tokens(41, 3, 64)});
    cfg_ = small_config(tmp_.path());
    GPT model(cfg_.model);
    init_parameters(*model, cfg_.seed);
    const auto groups = parameter_groups(*model);
    std::vector<torch::optim::OptimizerParamGroup> pg;
    pg.emplace_back(groups.decay, std::make_unique<torch::optim::AdamWOptions>(1e-3));
    pg.emplace_back(groups.no_decay, std::make_unique<torch::optim::AdamWOptions>(1e-3));
    torch::optim::AdamW opt(pg, torch::optim::AdamWOptions(1e-3));
    const auto idx = torch::randint(0, cfg_.model.vocab_size, {2, 4}, torch::kLong);
    lm_loss(model->forward(idx), idx).backward();  // one step, so AdamW has moments to save
    opt.step();
    TrainState state;
    state.step = 3;
    state.config = to_json(cfg_);
    save_checkpoint(run(), *model, opt, state);
  }
  fs::path run() const { return tmp_.file("run"); }
  TempDir tmp_;
  RunConfig cfg_;
};

TEST_F(OpenTrained, TheRunsOwnTokensAndOneProvenance) {
  OpenOptions o;
  o.tokens.sequences = 5, o.tokens.batch_size = 2;
  const auto t = open_trained(run(), o);
  ASSERT_EQ(t.batches.size(), 3u);  // 2 + 2 + 1 sequences
  EXPECT_EQ(t.batches[2].x.size(0), 1);
  EXPECT_EQ(t.batches[0].x.size(1), 4);  // the run's train.seq_len
  // Sequence k is tokens [4k, 4k + 4) of the val stream, which starts at 3.
  EXPECT_EQ(t.batches[1].x[1][0].item<int64_t>(), 3 + 4 * 3);
  EXPECT_EQ(t.batches[1].y[1][3].item<int64_t>(), 3 + 4 * 3 + 4);
  const auto p = to_json(t.provenance);
  EXPECT_EQ(p["step"], 3);
  EXPECT_EQ(p["arm"], "baseline");
  EXPECT_EQ(p["tier"], "t");
  EXPECT_EQ(p["run_seed"], 5);
  EXPECT_EQ(p["data"], cfg_.data.val);
  EXPECT_EQ(p["length"], 4);
  EXPECT_EQ(p["device"], "cpu");
  EXPECT_TRUE(p["val_fingerprint"].is_number_unsigned());
  EXPECT_TRUE(p["optimizer_state"].is_null());  // not asked for
  EXPECT_TRUE(p["parent"].is_null());
  EXPECT_EQ(t.config->seed, 5u);
}

TEST_F(OpenTrained, OptimizerStateWhenAskedAndClearErrorsOtherwise) {
  OpenOptions o;
  o.tokens.sequences = 2;
  o.with_optimizer = true;
  const auto t = open_trained(run(), o);
  ASSERT_TRUE(t.optimizer.has_value());
  EXPECT_FALSE(t.optimizer->optimizer.empty());
  EXPECT_TRUE(t.optimizer->weights.empty());  // the model holds them
  EXPECT_EQ(to_json(t.provenance)["optimizer_state"], true);

  o.tokens.sequences = 11;  // 41 tokens hold 10 sequences of 4
  const auto few = error_of([&] { open_trained(run(), o); });
  EXPECT_NE(few.find("holds only 10 sequences"), std::string::npos) << few;
  o.tokens.sequences = 2, o.tokens.length = 9;  // block_size 8
  EXPECT_NE(error_of([&] { open_trained(run(), o); }).find("exceeds the model's context"), std::string::npos);
  o.tokens.length = 0;
  const auto lone = RunDir(run()).checkpoints().back().dir / "model.safetensors";
  EXPECT_NO_THROW(open_trained(lone, o));  // the file carries its run's config in its metadata
}

}  // namespace
}  // namespace attnlab
