// End to end, through the real `attnlab` binary and the trainer: a run directory is trained by one
// process at a time (a second `train` is refused naming the holder, kill -9 lets go, a sweep skips a
// held run); a damaged run is reported as damaged with its remedy by `sweep --dry-run`, `sweep`,
// `report` and `train`, the sweep goes on with the other runs, and the remedy works; a metrics.jsonl
// that cannot be written stops the run with an error naming it (docs/runs.md).
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "attnlab/run_dir.h"
#include "attnlab/sweep.h"
#include "attnlab/trainer.h"
#include "e2e/sweep_fixture.h"
#include "unit/forked.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::exit_code;
using testing::metrics;
using testing::read;
using testing::start_cli;

// Kills a child process the test started when the test ends early.
struct Reaper {
  pid_t pid;
  ~Reaper() {
    if (pid > 0 && ::kill(pid, SIGKILL) == 0) exit_code(pid);
  }
};

std::vector<int64_t> logged_steps(const fs::path& run) {
  std::vector<int64_t> steps;
  for (const auto& line : metrics(run))
    if (!line.contains("type")) steps.push_back(line["step"].get<int64_t>());
  return steps;
}

std::vector<int64_t> one_to(int64_t n) {
  std::vector<int64_t> steps;
  for (int64_t s = 1; s <= n; ++s) steps.push_back(s);
  return steps;
}

std::string train_error(const RunConfig& cfg) {
  try {
    train(cfg);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

class RunIntegrity : public testing::SweepE2E {
 protected:
  fs::path run_dir() const { return dir() / "one"; }
  void SetUp() override {
    SweepE2E::SetUp();
    // The base, then the tier: the file the one-off run trains from.
    std::ofstream(dir() / "one.yaml") << "include: ['" << (dir() / "base.yaml").string() << "', '"
                                      << (dir() / "tiers/tiny.yaml").string() << "']\n";
  }
  // run_sweep with the built binary and two workers; its progress lines appended to `log`.
  static SweepOutcome sweep(const SweepSpec& spec, const std::vector<SweepRun>& runs, std::string& log) {
    SweepOptions options;
    options.executable = testing::kAttnlab;
    options.workers = 2;
    options.log = [&](const std::string& line) { log += line + "\n"; };
    return run_sweep(spec, runs, options);
  }
  // `attnlab train` arguments of a one-off tiny run in <tmp>/one.
  std::vector<std::string> one_args(int64_t max_steps) const {
    return {"train", "--config", (dir() / "one.yaml").string(), "--set", "model.arm=baseline", "--set", "seed=1",
            "--set", "train.threads=1", "--set", "eval.every=1000", "--set", "checkpoint.every=5",
            "--set", "train.max_steps=" + std::to_string(max_steps), "--set", "out_dir=" + run_dir().string()};
  }
};

TEST_F(RunIntegrity, ASecondTrainOnOneOutDirIsRefusedNamingTheHolderAndKillNineLetsGo) {
  const fs::path log1 = dir() / "first.log", log2 = dir() / "second.log", log3 = dir() / "third.log";
  const pid_t first = start_cli(one_args(1000000), log1);
  Reaper reaper{first};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (metrics(run_dir()).size() < 12 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_GE(metrics(run_dir()).size(), 12u) << read(log1);
  const std::string config_before = read(run_dir() / "config.yaml");

  // Same run, another budget (a resume would rewrite config.yaml): refused, naming pid and directory.
  EXPECT_EQ(exit_code(start_cli(one_args(20), log2)), 1) << read(log2);
  const std::string refused = read(log2);
  EXPECT_NE(refused.find("held by pid " + std::to_string(first)), std::string::npos) << refused;
  EXPECT_NE(refused.find(run_dir().string()), std::string::npos) << refused;
  EXPECT_EQ(read(run_dir() / "config.yaml"), config_before) << "the refused train rewrote config.yaml";
  const auto held = inspect_run(run_dir());
  ASSERT_TRUE(held.held_by.has_value());
  EXPECT_EQ(held.held_by->pid, first);

  ::kill(first, SIGKILL);
  EXPECT_EQ(exit_code(first), 128 + SIGKILL);
  reaper.pid = 0;
  const auto killed = inspect_run(run_dir());
  EXPECT_FALSE(killed.held_by.has_value()) << "kill -9 did not release the lock";
  ASSERT_EQ(killed.status, RunStatus::partial);
  ASSERT_GE(killed.step, 5);

  // The run resumes from its newest checkpoint and every step is logged once: one writer.
  const int64_t total = killed.step + 3;
  EXPECT_EQ(exit_code(start_cli(one_args(total), log3)), 0) << read(log3);
  EXPECT_EQ(logged_steps(run_dir()), one_to(total));
  EXPECT_EQ(inspect_run(run_dir()).status, RunStatus::finished);
}

TEST_F(RunIntegrity, ASweepSkipsARunAnotherProcessHoldsAndTrainsTheRest) {
  const fs::path file = sweep_file(6, "[1]");
  const auto spec = load_sweep(file);
  const auto runs = expand_sweep(spec);
  ASSERT_EQ(runs.size(), 2u);
  std::optional<RunWriter> holder = RunDir(runs[0].out_dir).claim(runs[0].resolved, false);  // as a train would
  const std::string me = "held by pid " + std::to_string(::getpid());

  EXPECT_EQ(exit_code(start_cli({"sweep", "--config", file.string(), "--dry-run"}, dir() / "dry.log")), 0);
  const std::string dry = read(dir() / "dry.log");
  EXPECT_NE(dry.find(me), std::string::npos) << dry;
  EXPECT_NE(dry.find("1 held by another process"), std::string::npos) << dry;

  std::string all;
  const auto outcome = sweep(spec, runs, all);
  EXPECT_EQ(outcome.held, 1);
  EXPECT_EQ(outcome.finished, 1);
  EXPECT_EQ(outcome.failed, 0);
  EXPECT_EQ(outcome.exit_code(), 1) << "a sweep that left a run untrained does not exit 0";
  EXPECT_NE(all.find("skip  " + runs[0].name + ": " + me), std::string::npos) << all;
  EXPECT_FALSE(fs::exists(runs[0].out_dir / "metrics.jsonl")) << "the held run was trained twice";
  EXPECT_FALSE(fs::exists(spec.out / "logs/tiny_baseline_s1.log")) << "a worker was started on the held run";
  const auto manifest = nlohmann::json::parse(read(spec.out / "manifest.json"));
  EXPECT_EQ(manifest["runs"][0]["held_by"]["pid"], ::getpid());

  holder.reset();  // the other process ends: the same command finishes the grid
  std::string again_log;
  const auto again = sweep(spec, runs, again_log);
  EXPECT_EQ(again.finished, 1);
  EXPECT_EQ(again.skipped, 1);
  EXPECT_EQ(again.exit_code(), 0);
}

TEST_F(RunIntegrity, DamagedRunsAreReportedWithTheRemedyTheSweepGoesOnAndTheRemedyWorks) {
  const fs::path file = sweep_file(6, "[1, 2, 3]");
  const auto spec = load_sweep(file);
  const auto runs = expand_sweep(spec);
  ASSERT_EQ(runs.size(), 6u);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(train(runs[i].resolved).status, TrainStatus::finished);
  auto final_of = [&](int i) { return nlohmann::json::parse(read(runs[i].out_dir / "final.json")); };
  auto write_final = [&](int i, const nlohmann::json& j) { std::ofstream(runs[i].out_dir / "final.json") << j.dump(2); };
  const std::string whole = read(runs[0].out_dir / "final.json");
  std::ofstream(runs[0].out_dir / "final.json") << whole.substr(0, whole.size() / 2);  // cut short
  auto sixteen = final_of(1);
  sixteen["steps"] = "sixteen";
  write_final(1, sixteen);
  auto null_loss = final_of(2);
  null_loss["final_val_loss"] = nullptr;
  write_final(2, null_loss);
  fs::remove(runs[3].out_dir / "config.yaml");  // checkpoints and metrics stay
  const std::string sixteen_text = read(runs[1].out_dir / "final.json");

  // --dry-run: every run listed, the damaged ones with file, fault and remedy; no raw parse error.
  EXPECT_EQ(exit_code(start_cli({"sweep", "--config", file.string(), "--dry-run"}, dir() / "dry.log")), 0);
  const std::string dry = read(dir() / "dry.log");
  EXPECT_NE(dry.find("0 finished, 0 partial, 0 stale, 2 not started, 4 damaged"), std::string::npos) << dry;
  EXPECT_NE(dry.find((runs[0].out_dir / "final.json").string() + ": is not valid JSON"), std::string::npos) << dry;
  EXPECT_NE(dry.find("\"steps\" has the wrong type (\"sixteen\""), std::string::npos) << dry;
  EXPECT_NE(dry.find("\"final_val_loss\" has the wrong type (null"), std::string::npos) << dry;
  EXPECT_NE(dry.find("holds checkpoints/, final.json, metrics.jsonl but no config.yaml"), std::string::npos) << dry;
  EXPECT_NE(dry.find("delete final.json and run the same `attnlab train` (or sweep) again: it resumes from the "
                     "newest checkpoint (step 6)"),
            std::string::npos)
      << dry;
  EXPECT_EQ(dry.find("json.exception"), std::string::npos) << dry;

  // The sweep trains the two runs it can and leaves the damaged ones as they are.
  std::string all;
  const auto outcome = sweep(spec, runs, all);
  EXPECT_EQ(outcome.damaged, 4);
  EXPECT_EQ(outcome.finished, 2);
  EXPECT_EQ(outcome.failed, 0);
  EXPECT_EQ(outcome.exit_code(), 1);
  for (int i = 0; i < 4; ++i) EXPECT_NE(all.find("DAMAGED " + runs[i].name + " (not started)"), std::string::npos) << all;
  for (int i = 4; i < 6; ++i) EXPECT_EQ(inspect_run(runs[i].out_dir, runs[i].config_hash).status, RunStatus::finished);
  EXPECT_EQ(read(runs[1].out_dir / "final.json"), sixteen_text) << "the sweep touched a damaged run";
  const auto manifest = nlohmann::json::parse(read(spec.out / "manifest.json"));
  EXPECT_EQ(manifest["runs"][1]["status"], "damaged");

  // The report lists them with the same words.
  EXPECT_EQ(exit_code(start_cli({"report", spec.out.string()}, dir() / "report.log")), 0) << read(dir() / "report.log");
  const std::string report = read(dir() / "report.log");
  EXPECT_NE(report.find("4 damaged"), std::string::npos) << report;
  EXPECT_NE(report.find(runs[1].name + ": DAMAGED: " + (runs[1].out_dir / "final.json").string()), std::string::npos)
      << report;

  // train: the same message, from the process and from the CLI.
  const auto sixteen_error = train_error(runs[1].resolved);
  EXPECT_NE(sixteen_error.find((runs[1].out_dir / "final.json").string()), std::string::npos) << sixteen_error;
  EXPECT_NE(sixteen_error.find("delete final.json"), std::string::npos) << sixteen_error;
  EXPECT_EQ(exit_code(start_cli(train_arguments(runs[2]), dir() / "train2.log")), 1);
  const std::string null_error = read(dir() / "train2.log");
  EXPECT_NE(null_error.find("\"final_val_loss\" has the wrong type (null"), std::string::npos) << null_error;
  EXPECT_NE(null_error.find("delete final.json"), std::string::npos) << null_error;
  EXPECT_EQ(null_error.find("json.exception"), std::string::npos) << null_error;
  const auto lost_error = train_error(runs[3].resolved);
  EXPECT_NE(lost_error.find("but no config.yaml"), std::string::npos) << lost_error;
  EXPECT_NE(lost_error.find("move the directory away"), std::string::npos) << lost_error;
  EXPECT_FALSE(fs::exists(runs[3].out_dir / "config.yaml"));

  // The remedies: delete final.json (the run rewrites it from its last checkpoint); restore
  // config.yaml from a checkpoint's state.json.
  fs::remove(runs[1].out_dir / "final.json");
  ASSERT_EQ(train(runs[1].resolved).status, TrainStatus::finished);
  const auto rewritten = inspect_run(runs[1].out_dir, runs[1].config_hash);
  EXPECT_EQ(rewritten.status, RunStatus::finished) << rewritten.detail;
  EXPECT_EQ(rewritten.step, 6);
  EXPECT_EQ(logged_steps(runs[1].out_dir), one_to(6));
  const auto ckpts = RunDir(runs[3].out_dir).checkpoints();
  ASSERT_FALSE(ckpts.empty());
  const auto state = nlohmann::json::parse(read(ckpts.back().dir / "state.json"));
  std::ofstream(runs[3].out_dir / "config.yaml") << state.at("config").dump(2);
  EXPECT_EQ(inspect_run(runs[3].out_dir, runs[3].config_hash).status, RunStatus::finished);
  EXPECT_EQ(train(runs[3].resolved).status, TrainStatus::finished);
}

TEST_F(RunIntegrity, AMetricsFileThatCannotBeWrittenStopsTheRunNamingIt) {
  const auto spec = load_sweep(sweep_file(400, "[1]", 1000));  // no checkpoint before the end
  auto cfg = expand_sweep(spec)[0].resolved;
  const fs::path metrics_file = fs::path(cfg.out_dir) / "metrics.jsonl";
  const std::string error = testing::in_child([&] {
    testing::limit_file_size(8192);  // config.yaml fits; metrics.jsonl outgrows it within 400 steps
    try {
      train(cfg);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("finished without an error");
  });
  EXPECT_NE(error.find(metrics_file.string()), std::string::npos) << error;
  EXPECT_NE(error.find("File too large"), std::string::npos) << error;
  const auto steps = logged_steps(cfg.out_dir);  // whole lines only (metrics() parses every line)
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps, one_to(static_cast<int64_t>(steps.size())));
  EXPECT_LT(steps.size(), 400u);
  EXPECT_NE(error.find("cannot append the record of step " + std::to_string(steps.size() + 1)), std::string::npos)
      << error;
  EXPECT_FALSE(fs::exists(fs::path(cfg.out_dir) / "final.json"));
}

}  // namespace
}  // namespace attnlab
