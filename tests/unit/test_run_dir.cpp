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
#include "attnlab/shards.h"
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

// A run with eval.tasks records its last accuracies; one without has no "tasks" key (old records read as before).
TEST(FinalRecord, TaskAccuraciesRoundTripAndAreWrittenOnlyWhereScored) {
  EXPECT_FALSE(to_json(sample_record()).contains("tasks"));
  EXPECT_TRUE(final_record_from_json(to_json(sample_record()), "f").tasks.empty());
  auto r = sample_record();
  r.tasks = {{"copa", {0.5, 0.25, 8, 99}}};
  const auto j = to_json(r);
  EXPECT_EQ(j["tasks"]["copa"]["acc_norm"], 0.25);
  const auto back = final_record_from_json(j, "final.json");
  EXPECT_EQ(back.tasks.at("copa").n, 8);
  EXPECT_EQ(to_json(back), j);
  auto bad = j;
  bad["tasks"]["copa"]["acc"] = -0.5;
  const auto error = error_of([&] { final_record_from_json(bad, "/r/final.json"); });
  EXPECT_NE(error.find("/r/final.json"), std::string::npos) << error;
  EXPECT_NE(error.find("tasks.copa.acc"), std::string::npos) << error;
}

SelfCheckResult sample_self_check() {
  SelfCheckResult c;
  c.backend = "flash", c.arm = "sink_logit", c.dtype = "BFloat16", c.device = "cuda:0", c.head_dim = 64;
  c.shape = {2, 2, 192};
  c.checks = {{"o", 3e-3, 2.5e-3, 7e-3}, {"lse", 1e-6, 1e-6, 1.02e-4}, {"dq", 9e-3, 5e-3, 1.2e-2}};
  c.milliseconds = 41.5;
  return c;
}

// A GPU run's record carries its self-check, in the order the rule holds the tensors; a CPU run's
// record has no such key (the two keys only some runs have).
TEST(FinalRecord, TheSelfCheckRoundTripsAndIsWrittenOnlyWhereOneRan) {
  EXPECT_FALSE(to_json(sample_record()).contains("attention_self_check"));
  EXPECT_FALSE(final_record_from_json(to_json(sample_record()), "f").attention_self_check);
  auto r = sample_record();
  r.attention_self_check = sample_self_check();
  const auto j = to_json(r);
  EXPECT_EQ(j["attention_self_check"]["worst"], "dq");  // 9e-3 of 1.2e-2 is the nearest its bound
  EXPECT_EQ(j["attention_self_check"]["passed"], true);
  const auto back = final_record_from_json(j, "final.json");
  ASSERT_TRUE(back.attention_self_check);
  EXPECT_EQ(to_json(back), j);
  std::vector<std::string> order;
  for (const auto& c : back.attention_self_check->checks) order.push_back(c.tensor);
  EXPECT_EQ(order, (std::vector<std::string>{"o", "lse", "dq"}));
}

TEST(FinalRecord, ADamagedSelfCheckIsAnErrorNamingItsKey) {
  auto r = sample_record();
  r.attention_self_check = sample_self_check();
  auto j = to_json(r);
  j["attention_self_check"]["tensors"]["dq"].erase("bound");
  auto what = error_of([&] { final_record_from_json(j, "/r/final.json"); });
  EXPECT_NE(what.find("/r/final.json"), std::string::npos) << what;
  EXPECT_NE(what.find("attention_self_check.tensors.dq.bound"), std::string::npos) << what;
  j = to_json(r);
  j["attention_self_check"]["passed"] = false;  // the errors say it passed
  what = error_of([&] { final_record_from_json(j, "f"); });
  EXPECT_NE(what.find("attention_self_check.passed"), std::string::npos) << what;
  j = to_json(r);
  j["attention_self_check"]["tensors"]["dz"] = j["attention_self_check"]["tensors"]["dq"];
  what = error_of([&] { final_record_from_json(j, "f"); });
  EXPECT_NE(what.find("'dz'"), std::string::npos) << what;
}

TEST(ResumeRule, OnlyTheBudgetObservationAndPlaceMayChange) {
  RunConfig a;
  auto b = a;
  b.train.max_steps = 99, b.train.token_budget = 123, b.track.activations.every = 5, b.out_dir = "elsewhere";
  EXPECT_TRUE(resume_incompatible_keys(a, b).empty());
  b.optim.lr = 1.0, b.model.arm = "combo";
  EXPECT_EQ(resume_incompatible_keys(a, b), (std::vector<std::string>{"model.arm", "optim.lr"}));
}

// data.sampling changes every batch (and the validation set): a resume may not change it;
// eval.trigger_tokens only splits what is measured, so it may.
TEST(ResumeRule, DataSamplingIsFixedAndTriggerTokensAreFree) {
  RunConfig a;
  auto b = a;
  b.eval.trigger_tokens = {0, 1};
  EXPECT_TRUE(resume_incompatible_keys(a, b).empty());
  b.data.sampling = WindowSampling::document;
  EXPECT_EQ(resume_incompatible_keys(a, b), (std::vector<std::string>{"data.sampling"}));
  EXPECT_EQ(resume_incompatible_keys(b, a), (std::vector<std::string>{"data.sampling"}));
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

// A damaged run (docs/runs.md, "Damaged runs"): the state names the file, what is wrong with it and
// what to do; every reader of the run sees the same words.
void expect_damaged(const fs::path& dir, const std::vector<std::string>& words) {
  const auto state = inspect_run(dir, "0123456789abcdef");
  EXPECT_EQ(state.status, RunStatus::damaged) << describe(state);
  EXPECT_FALSE(state.final_record.has_value());
  for (const auto& w : words) EXPECT_NE(state.detail.find(w), std::string::npos) << "'" << w << "' not in: " << state.detail;
  EXPECT_EQ(state.detail.find("json.exception"), std::string::npos) << state.detail;
  EXPECT_EQ(describe(state).rfind("DAMAGED: ", 0), 0u) << describe(state);
}

TEST(RunDir, ADamagedFinalRecordMakesTheRunDamagedSayingWhatToDo) {
  TempDir tmp;
  const RunDir run(tmp.file("run"));
  run.claim(small_config(tmp.path()), false);
  fs::create_directories(run.checkpoints_path() / "step_000030");
  const std::string file = run.final_file().string();
  const std::string remedy = "delete final.json and run the same `attnlab train` (or sweep) again: it resumes from "
                             "the newest checkpoint (step 30) and rewrites final.json";
  auto write = [&](const nlohmann::json& j) { std::ofstream(run.final_file()) << j.dump(); };
  auto with = [&](const char* key, const nlohmann::json& value) {
    auto j = to_json(sample_record());
    j[key] = value;
    return j;
  };
  auto j = to_json(sample_record());
  j.erase("config_hash");
  write(j);
  expect_damaged(run.path(), {file, "lacks \"config_hash\"", remedy});
  EXPECT_THROW(run.final_record(), FileError);
  std::ofstream(run.final_file()) << to_json(sample_record()).dump().substr(0, 40);  // cut short
  expect_damaged(run.path(), {file, "is not valid JSON", remedy});
  std::ofstream(run.final_file()) << "";  // empty
  expect_damaged(run.path(), {file, "is not valid JSON"});
  write(with("final_val_loss", nullptr));  // what a writer of NaN leaves
  expect_damaged(run.path(), {file, "\"final_val_loss\" has the wrong type (null, not a number)", remedy});
  write(with("steps", "sixteen"));
  expect_damaged(run.path(), {file, "\"steps\" has the wrong type (\"sixteen\", not an integer)"});
  write(with("steps", 16.5));
  expect_damaged(run.path(), {"\"steps\" has the wrong type (16.5"});
  write(with("steps", true));
  expect_damaged(run.path(), {"\"steps\" has the wrong type (true"});
  write(with("steps", 0));
  expect_damaged(run.path(), {"\"steps\" is 0, below 1"});
  write(with("tokens_seen", -3));
  expect_damaged(run.path(), {"\"tokens_seen\" is -3, below 0"});
  write(with("final_val_loss", -1.0));
  expect_damaged(run.path(), {"\"final_val_loss\" is -1, below 0"});
  write(with("seed", -7));  // nlohmann alone would read 2^64 - 7
  expect_damaged(run.path(), {"\"seed\" has the wrong type (-7, not a non-negative integer)"});
  write(nlohmann::json::array({1, 2}));
  expect_damaged(run.path(), {file, "expected a JSON object"});

  fs::remove_all(run.checkpoints_path());  // nothing left to resume from
  write(with("steps", "sixteen"));
  expect_damaged(run.path(), {"no checkpoint is left, so the run trains again from step 0"});
  write(to_json(sample_record()));
  EXPECT_EQ(inspect_run(run.path(), "0123456789abcdef").status, RunStatus::finished);
  EXPECT_EQ(inspect_run(run.path(), "ffff").status, RunStatus::stale);
}

TEST(RunDir, ADirectoryWithoutConfigYamlIsDamagedUnlessEmpty) {
  TempDir tmp;
  const RunDir run(tmp.file("run"));
  EXPECT_EQ(inspect_run(run.path()).status, RunStatus::not_started);  // no directory at all
  fs::create_directories(run.checkpoints_path() / "step_000004");
  std::ofstream(run.metrics_file()) << "{\"step\": 1}\n";
  expect_damaged(run.path(), {run.path().string(), "holds checkpoints/, metrics.jsonl but no config.yaml",
                              "state.json keeps the run's config", "move the directory away"});
  const auto refused = error_of([&] { run.claim(small_config(tmp.path()), false); });
  EXPECT_NE(refused.find("holds checkpoints/, metrics.jsonl but no config.yaml"), std::string::npos) << refused;
  EXPECT_FALSE(run.claimed()) << "a refused claim wrote config.yaml";
  fs::remove_all(run.checkpoints_path());
  fs::remove(run.metrics_file());
  std::ofstream(run.path() / "notes.txt") << "x";
  expect_damaged(run.path(), {"holds notes.txt and no config.yaml: not an attnlab run directory"});
  fs::remove(run.path() / "notes.txt");
  EXPECT_EQ(inspect_run(run.path()).status, RunStatus::not_started);
}

TEST(RunDir, AConfigYamlThatDoesNotLoadIsDamaged) {
  TempDir tmp;
  const RunDir run(tmp.file("run"));
  run.claim(small_config(tmp.path()), false);
  std::ofstream(run.config_file()) << "model: {arm: baseline\n";  // cut short
  expect_damaged(run.path(), {run.config_file().string(), "state.json keeps the run's config"});
  auto bad = small_config(tmp.path());
  bad.optim.lr = -1;
  std::ofstream(run.config_file()) << to_yaml(bad);  // loads, fails the checks
  expect_damaged(run.path(), {"optim.lr"});
  EXPECT_NE(error_of([&] { run.claim(small_config(tmp.path()), false); }).find("config.yaml"), std::string::npos);
}

TEST(Metrics, ReadsValidationPointsAndActivationRecordsAndSkipsACutLine) {
  TempDir tmp;
  ActivationCapture capture;
  LayerActivations a;
  a.layer = 0, a.peak.max_abs = 3.0, a.peak_sequence = 1, a.peak_position = 2;
  capture.layers.push_back(a);
  {
    MetricsLog log(tmp.file("metrics.jsonl"), -1);
    StepRecord step;
    step.step = 1, step.tokens = 8;
    log.append(step);
    step.step = 2, step.tokens = 16, step.val_loss = 4.5;
    log.append(step);
    log.append(ActivationRecord{2, 1, {}, capture});
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
  // A record the trainer never writes is skipped, naming the file and line, and the rest is read.
  std::ofstream(tmp.file("bad.jsonl")) << R"({"type": "activations", "step": 4, "layers": [{"layer": 0}]})" "\n"
                                       << R"({"step": 5, "val_loss": 4.0})" "\n"
                                       << R"({"step": 6, "val_loss": "4.0"})" "\n";
  const auto bad = read_metrics(tmp.file("bad.jsonl"));
  ASSERT_EQ(bad.skipped.size(), 2u);
  EXPECT_EQ(bad.skipped[0].rfind(tmp.file("bad.jsonl") + ":1: an activation record is incomplete", 0), 0u) << bad.skipped[0];
  EXPECT_EQ(bad.skipped[1], tmp.file("bad.jsonl") + ":3: \"val_loss\" has the wrong type (\"4.0\", not a number); line skipped");
  ASSERT_EQ(bad.validation.size(), 1u);
  EXPECT_EQ(bad.validation[0].step, 5);
}

// Evaluated steps of a run with eval.tasks carry "tasks"; the reader takes them, and a log without
// any (older runs) reads as before.
TEST(Metrics, TaskAccuraciesAreLoggedOnEvaluatedStepsAndReadBack) {
  TempDir tmp;
  {
    MetricsLog log(tmp.file("metrics.jsonl"), -1);
    StepRecord step;
    step.step = 1, step.tokens = 8;
    log.append(step);
    step.step = 2, step.tokens = 16, step.val_loss = 4.5, step.tasks = {{"copa", {0.75, 0.5, 4, 7}}};
    log.append(step);
  }
  std::ifstream in(tmp.file("metrics.jsonl"));
  std::string first, second;
  std::getline(in, first), std::getline(in, second);
  EXPECT_EQ(first.find("tasks"), std::string::npos) << first;
  EXPECT_NE(second.find(R"("tasks":{"copa":{"acc":0.75,"acc_norm":0.5,"fingerprint":"0000000000000007","n":4}})"), std::string::npos) << second;
  const auto h = read_metrics(tmp.file("metrics.jsonl"));
  ASSERT_EQ(h.tasks.size(), 1u);
  EXPECT_EQ(h.tasks[0].step, 2);
  EXPECT_EQ(h.tasks[0].tokens, 16);
  EXPECT_EQ(h.tasks[0].tasks.at("copa").acc, 0.75);
  ASSERT_EQ(h.validation.size(), 1u);
  std::ofstream(tmp.file("old.jsonl")) << R"({"step":2,"tokens":16,"train_loss":5.0,"val_loss":4.5})" "\n";
  EXPECT_TRUE(read_metrics(tmp.file("old.jsonl")).tasks.empty());
  // A malformed "tasks" skips its whole line with a warning naming file:line, as any bad line does.
  std::ofstream(tmp.file("bad.jsonl")) << R"({"step":2,"tokens":16,"val_loss":4.5,"tasks":{"copa":{"acc":2}}})" "\n"
                                       << R"({"step":3,"tokens":24,"val_loss":4.4,"tasks":{"copa":{"acc":2,"acc_norm":0.5,"n":4,"fingerprint":"0000000000000007"}}})" "\n"
                                       << R"({"step":4,"tokens":32,"val_loss":4.3})" "\n";
  const auto bad = read_metrics(tmp.file("bad.jsonl"));
  EXPECT_TRUE(bad.tasks.empty());
  ASSERT_EQ(bad.validation.size(), 1u) << "the bad lines are skipped whole, not half";
  EXPECT_EQ(bad.validation[0].step, 4);
  ASSERT_EQ(bad.skipped.size(), 2u);
  EXPECT_NE(bad.skipped[0].find("bad.jsonl:1: "), std::string::npos) << bad.skipped[0];
  EXPECT_NE(bad.skipped[0].find("tasks.copa.acc_norm"), std::string::npos) << bad.skipped[0];
  EXPECT_NE(bad.skipped[1].find("bad.jsonl:2: "), std::string::npos) << bad.skipped[1];
  EXPECT_NE(bad.skipped[1].find("is 2, outside [0, 1]"), std::string::npos) << bad.skipped[1];
}

// The typed records are written byte for byte as the trainer wrote its hand-made JSON before they were
// typed (the lines below are that writer's output), and read back.
TEST(Metrics, TypedRecordsWriteTheTrainersLinesAndReadBack) {
  const StepRecord step{12, 3072, 4.125, std::nullopt, 3.0e-4, 0.8125, 12345.6789, 10.5, 0.0123};
  EXPECT_EQ(to_json(step).dump(), R"({"elapsed_s":10.5,"grad_norm":0.8125,"lr":0.0003,"mfu":0.0123,"step":12,)"
                                  R"("tokens":3072,"tokens_per_s":12345.6789,"train_loss":4.125,"val_loss":null})");
  StepRecord evaluated = step;
  evaluated.step = 13, evaluated.val_loss = 3.75, evaluated.mfu.reset();  // a CPU run: no MFU key
  EXPECT_EQ(to_json(evaluated).dump(), R"({"elapsed_s":10.5,"grad_norm":0.8125,"lr":0.0003,"step":13,"tokens":3072,)"
                                       R"("tokens_per_s":12345.6789,"train_loss":4.125,"val_loss":3.75})");
  const ScheduleChange change{20, 20, 100, 7.3e-05, 5.8e-04};
  EXPECT_EQ(to_json(change).dump(), R"({"next_lr":0.00058,"next_lr_before":7.3e-05,"step":20,"total_steps":100,)"
                                    R"("total_steps_before":20,"type":"schedule_change"})");
  ActivationCapture capture;
  LayerActivations a;
  a.layer = 0, a.peak.max_abs = 3.0, a.peak_sequence = 1, a.peak_position = 2;
  capture.layers.push_back(a);
  const ActivationRecord activations{13, 4, {100.0, 1000.0}, capture};
  const auto j = to_json(activations);
  EXPECT_EQ(j["type"], "activations");
  EXPECT_EQ(j["probe_sequences"], 4);
  EXPECT_EQ(j["massive"].dump(), R"({"min_max":100.0,"min_ratio":1000.0})");
  EXPECT_EQ(j["layers"], layers_json(capture));

  TempDir tmp;
  {
    MetricsLog log(tmp.file("metrics.jsonl"), -1);
    log.append(change);
    log.append(step);
    log.append(evaluated);
    log.append(activations);
  }
  // A record of a type this build does not know (a later build's) is skipped, not read as a step.
  std::ofstream(tmp.file("metrics.jsonl"), std::ios::app) << R"({"type": "window", "step": 14, "val_loss": 1.0})" "\n";
  const auto h = read_metrics(tmp.file("metrics.jsonl"));
  ASSERT_EQ(h.schedule_changes.size(), 1u);
  EXPECT_EQ(h.schedule_changes[0].step, 20);
  EXPECT_EQ(h.schedule_changes[0].total_steps_before, 20);
  EXPECT_EQ(h.schedule_changes[0].total_steps, 100);
  EXPECT_EQ(h.schedule_changes[0].next_lr_before, 7.3e-05);
  EXPECT_EQ(h.schedule_changes[0].next_lr, 5.8e-04);
  ASSERT_EQ(h.training.size(), 2u);  // the schedule change is no step record
  EXPECT_EQ(h.training[0].step, 12);
  EXPECT_EQ(h.training[1].train_loss, 4.125);
  ASSERT_EQ(h.validation.size(), 1u);
  EXPECT_EQ(h.validation[0].step, 13);
  EXPECT_EQ(h.validation[0].val_loss, 3.75);
  ASSERT_EQ(h.activations.size(), 1u);
  EXPECT_EQ(h.activations[0].layers[0].peak_position, 2);

  std::ofstream(tmp.file("bad.jsonl")) << R"({"type": "schedule_change", "step": 4, "total_steps": 9})" "\n";
  const auto incomplete = read_metrics(tmp.file("bad.jsonl"));  // skipped, naming the file, line and key
  EXPECT_TRUE(incomplete.schedule_changes.empty());
  ASSERT_EQ(incomplete.skipped.size(), 1u);
  EXPECT_NE(incomplete.skipped[0].find(tmp.file("bad.jsonl") + ":1: a schedule_change record lacks \"total_steps_before\""),
            std::string::npos)
      << incomplete.skipped[0];
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
    state.step = 3, state.tokens_seen = 3 * 8;  // 3 steps of 2 x 4 tokens: state.json checks tokens_seen >= step
    state.config = cfg_;
    save_checkpoint(RunDir(run()).checkpoints_path(), *model, opt, state);
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

// The one rule for a run's tokenizer (docs/data.md, "The run's tokenizer"), which sample and export-hf
// both follow: the tokenizer.json beside the train or val shards, else GPT-2 BPE for GPT-2's
// vocabulary (llm.c's shards come without one), else unknown.
TEST(RunTokenizer, TheTokenizerJsonBesideTheShardsElseGpt2ForItsVocabularyElseUnknown) {
  TempDir tmp;
  fs::create_directories(tmp.file("bytes"));
  fs::create_directories(tmp.file("plain"));
  tmp.write_text("bytes/tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 257, "eot": 256})");
  RunConfig cfg;
  cfg.data.train = tmp.file("plain/x_train_*.bin");
  cfg.data.val = tmp.file("bytes/x_val_*.bin");
  const auto beside_val = run_tokenizer(cfg, 257);  // the train shards' directory has none: the val shards'
  EXPECT_EQ(beside_val.tokenizer, "bytes");
  EXPECT_EQ(beside_val.eot, 256);
  EXPECT_FALSE(beside_val.assumed);
  EXPECT_EQ(beside_val.file, tmp.file("bytes/tokenizer.json"));

  cfg.data.val = tmp.file("plain/x_val_*.bin");
  const auto gpt2 = run_tokenizer(cfg, kGpt2VocabSize);
  EXPECT_EQ(gpt2.tokenizer, "gpt2");
  EXPECT_EQ(gpt2.vocab_size, 50257);
  EXPECT_EQ(gpt2.eot, 50256);
  EXPECT_TRUE(gpt2.assumed);
  EXPECT_EQ(run_tokenizer(cfg, 257).tokenizer, "unknown");
  EXPECT_EQ(run_tokenizer(std::nullopt, kGpt2VocabSize).tokenizer, "gpt2");  // a lone model file
  EXPECT_EQ(run_tokenizer(std::nullopt, 300).tokenizer, "unknown");
  cfg.data.train = cfg.data.val = tmp.file("elsewhere/x_*.bin");  // shards not here: nothing to read, the same rule
  EXPECT_EQ(run_tokenizer(cfg, kGpt2VocabSize).tokenizer, "gpt2");
  EXPECT_EQ(run_tokenizer(cfg, 257).tokenizer, "unknown");

  cfg.data.train = tmp.file("plain/x_train_*.bin");
  tmp.write_text("plain/tokenizer.json", "{");  // damaged: an error naming it, never a guess
  try {
    run_tokenizer(cfg, 257);
    ADD_FAILURE() << "a damaged tokenizer.json was read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(tmp.file("plain/tokenizer.json")), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnlab
