// End to end: sweeps of tiny runs through the real `attnlab` binary (the one this build made).
// A crashed sweep (one run finished, one stopped mid-way) completes on re-run without redoing the
// finished run; SIGTERM to the sweep reaches its workers, which checkpoint; the Slurm script's
// task runs the same command; and the report pairs what the sweep made.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "attnlab/report.h"
#include "attnlab/sweep.h"
#include "attnlab/trainer.h"
#include "e2e/sweep_fixture.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::exit_code;
using testing::kAttnlab;
using testing::read;
using testing::metrics;
using testing::start_cli;
using testing::SweepE2E;

TEST_F(SweepE2E, CrashedSweepCompletesOnRerunWithoutRedoingFinishedRuns) {
  const auto spec = load_sweep(sweep_file(12, "[1, 2]"));
  const auto runs = expand_sweep(spec);
  ASSERT_EQ(runs.size(), 4u);
  // The state a crash leaves: baseline/s1 finished, baseline/s2 stopped at step 5, the rest untouched.
  ASSERT_EQ(runs[0].name, "tiny/baseline/s1");
  ASSERT_EQ(train(runs[0].resolved).status, TrainStatus::finished);
  TrainOptions stop;
  stop.stop_after_steps = 5;
  ASSERT_EQ(train(runs[1].resolved, stop).status, TrainStatus::interrupted);
  const std::string finished_before = read(runs[0].out_dir / "final.json");
  const auto finished_mtime = fs::last_write_time(runs[0].out_dir / "final.json");

  std::vector<std::string> log;
  SweepOptions options;
  options.executable = kAttnlab;
  options.workers = 2;
  options.log = [&](const std::string& line) { log.push_back(line); };
  const auto outcome = run_sweep(spec, runs, options);
  EXPECT_EQ(outcome.exit_code(), 0);
  EXPECT_EQ(outcome.skipped, 1);
  EXPECT_EQ(outcome.finished, 3);
  EXPECT_EQ(outcome.failed, 0);
  EXPECT_EQ(read(runs[0].out_dir / "final.json"), finished_before);
  EXPECT_EQ(fs::last_write_time(runs[0].out_dir / "final.json"), finished_mtime);
  EXPECT_FALSE(fs::exists(spec.out / "logs/tiny_baseline_s1.log")) << "the finished run was started again";
  // The stopped run resumed from its checkpoint: each step logged once.
  const auto lines = metrics(runs[1].out_dir);
  ASSERT_EQ(lines.size(), 12u);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i]["step"], int64_t(i + 1));
  EXPECT_NE(read(spec.out / "logs/tiny_baseline_s2.log").find("resume: from"), std::string::npos);
  // "k of N runs finished" as each run ends, counting the run finished before; an ETA while any is left.
  std::vector<std::string> counts;
  for (const auto& line : log)
    if (line.find(" runs finished") != std::string::npos) counts.push_back(line);
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts[0].rfind("2 of 4 runs finished, ", 0), 0u) << counts[0];
  EXPECT_NE(counts[0].find(", ETA "), std::string::npos) << counts[0];
  EXPECT_EQ(counts[2], "4 of 4 runs finished, 0 running, 0 queued");
  for (const auto& state : inspect_runs(runs)) EXPECT_EQ(state.status, RunStatus::finished);
  const auto manifest = nlohmann::json::parse(read(spec.out / "manifest.json"));
  for (const auto& run : manifest["runs"]) EXPECT_EQ(run["status"], "finished") << run["name"];

  // Again: nothing to do.
  const auto again = run_sweep(spec, runs, options);
  EXPECT_EQ(again.skipped, 4);
  EXPECT_EQ(again.finished, 0);

  // The report pairs the sweep's runs: same seed, tier and validation data.
  const auto report = build_report(spec.out, false);
  ASSERT_EQ(report.groups.size(), 1u);
  EXPECT_EQ(report.groups[0].differences[0].contrast.id, "zero_option");
  EXPECT_EQ(report.groups[0].differences[0].stats.n, 2);
  EXPECT_TRUE(report.groups[0].differences[0].skipped.empty());
}

TEST_F(SweepE2E, SigtermReachesTheWorkersAndTheSameCommandFinishes) {
  const fs::path file = sweep_file(300, "[1]", 50);
  const fs::path log = dir() / "sweep.log";
  const fs::path first_run = dir() / "out/tiny/baseline/s1";
  const pid_t pid = start_cli({"sweep", "--config", file.string(), "--workers", "1"}, log);
  // Wait for the first run to be under way, then stop the sweep (only the sweep: it must forward).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (metrics(first_run).size() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GE(metrics(first_run).size(), 3u) << read(log);
  ::kill(pid, SIGTERM);
  EXPECT_EQ(exit_code(pid), 128 + SIGTERM) << read(log);
  const auto stopped = inspect_run(first_run);
  if (stopped.status == RunStatus::partial) {
    EXPECT_GE(stopped.step, 3) << "the worker checkpointed when stopped";
  }
  EXPECT_EQ(inspect_run(dir() / "out/tiny/sink_logit/s1").status, RunStatus::not_started) << "no run starts after a stop";
  EXPECT_NE(read(log).find("signal 15"), std::string::npos) << read(log);

  // The same command finishes the grid; every step of the stopped run is logged once.
  EXPECT_EQ(exit_code(start_cli({"sweep", "--config", file.string(), "--workers", "1"}, log)), 0) << read(log);
  const auto lines = metrics(first_run);
  ASSERT_EQ(lines.size(), 300u);
  for (size_t i = 0; i < lines.size(); ++i) ASSERT_EQ(lines[i]["step"], int64_t(i + 1));
  EXPECT_EQ(inspect_run(dir() / "out/tiny/sink_logit/s1").status, RunStatus::finished);

  // --dry-run reports them finished; report runs from the CLI too.
  EXPECT_EQ(exit_code(start_cli({"sweep", "--config", file.string(), "--dry-run"}, dir() / "dry.log")), 0);
  EXPECT_NE(read(dir() / "dry.log").find("2 finished, 0 partial, 0 stale, 0 not started"), std::string::npos)
      << read(dir() / "dry.log");
  EXPECT_EQ(exit_code(start_cli({"report", (dir() / "out").string(), "--format", "csv"}, dir() / "report.log")), 0)
      << read(dir() / "report.log");
  EXPECT_TRUE(fs::exists(dir() / "out/report/differences.csv"));
}

TEST_F(SweepE2E, SlurmTaskRunsTheSameTrainCommand) {
  const auto spec = load_sweep(sweep_file(6, "[1]"));
  const auto runs = expand_sweep(spec);
  const auto script = emit_slurm(spec, runs, kAttnlab).front();
  // Outside Slurm: choose the array task by hand; no SLURM_ARRAY_JOB_ID, so no requeue.
  const std::string cmd = "env -u SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID=1 bash " + script.string() + " > " +
                          (dir() / "task.log").string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << read(dir() / "task.log");
  EXPECT_EQ(inspect_run(runs[1].out_dir, runs[1].config_hash).status, RunStatus::finished) << read(dir() / "task.log");
  EXPECT_EQ(inspect_run(runs[0].out_dir).status, RunStatus::not_started);
}

}  // namespace
}  // namespace attnlab
