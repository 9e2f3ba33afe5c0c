// The Slurm script's time limit and signals without Slurm: the warning margin (a sweep setting, by
// default a tenth of the limit, refused when it does not fit), and what the emitted script does when
// Slurm signals it, run under bash with stand-ins for the trainer and for scontrol: USR1 (the warning
// before the time limit) requeues the task, TERM (scancel, preemption) never does. The same script
// against a real slurmctld is tests/slurm/test_slurm_cluster.py.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <fstream>

#include "attnlab/sweep.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class SlurmScript : public ::testing::Test {
 protected:
  void SetUp() override {
    write("base.yaml", "seed: 1\nmodel: {arm: baseline, n_layer: 1, n_head: 2, d_model: 32, block_size: 32, "
                       "vocab_size: 64}\ndata: {train: 'x_train_*.bin', val: 'x_val_*.bin'}\n"
                       "train: {batch_size: 2, seq_len: 16, max_steps: 10}\n");
  }
  fs::path dir() const { return tmp_.path(); }
  fs::path write(const std::string& name, const std::string& text) {
    fs::create_directories((dir() / name).parent_path());
    std::ofstream(dir() / name) << text;
    return dir() / name;
  }
  SweepSpec sweep(const std::string& body) {
    return load_sweep(write("s.yaml", "base: base.yaml\nout: " + (dir() / "out").string() + "\ngrid: {seed: [1]}\n" + body));
  }
  std::string error_of(const std::string& body) {
    try {
      sweep(body);
    } catch (const SweepError& e) {
      return e.what();
    }
    return "no error";
  }
  std::string script_text(const std::string& body) {
    const auto spec = sweep(body);
    return read_text(emit_slurm(spec, expand_sweep(spec), "/opt/attnlab").front());
  }
  testing::TempDir tmp_;
};

TEST_F(SlurmScript, TimeLimitsAreReadAsSlurmReadsThem) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"30", 1800}, {"1:30", 90}, {"02:00:00", 7200}, {"1-0", 86400}, {"1-2:30", 95400}, {"1-2:30:15", 95415},
      {"90", 5400}, {"0:45", 45}};
  for (const auto& [text, seconds] : cases) EXPECT_EQ(slurm_time_seconds(text), seconds) << text;
  for (const char* none : {"0", "INFINITE", "UNLIMITED", "0:0:0"}) EXPECT_EQ(slurm_time_seconds(none), std::nullopt) << none;
  for (const char* bad : {"", "1:2:3:4", "4h", "1-2-3", "-5", "1.5", "1-", ":30", "9999999999"}) {
    try {
      slurm_time_seconds(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const SweepError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST_F(SlurmScript, TheWarningMarginIsATenthOfTheLimitUnlessTheSweepSetsIt) {
  EXPECT_NE(script_text("slurm: {time: '00:03:00'}\n").find("#SBATCH --signal=B:USR1@18\n"), std::string::npos);
  EXPECT_NE(script_text("slurm: {time: '04:00:00'}\n").find("#SBATCH --signal=B:USR1@300\n"), std::string::npos);
  EXPECT_NE(script_text("slurm: {time: 2}\n").find("#SBATCH --signal=B:USR1@12\n"), std::string::npos);
  EXPECT_NE(script_text("").find("#SBATCH --signal=B:USR1@300\n"), std::string::npos) << "no limit known";
  EXPECT_NE(script_text("slurm: {time: 10}\nslurm_signal_margin: 45\n").find("#SBATCH --signal=B:USR1@45\n"),
            std::string::npos);
  EXPECT_NE(script_text("slurm_signal_margin: 45\n").find("#SBATCH --signal=B:USR1@45\n"), std::string::npos);
}

TEST_F(SlurmScript, AMarginThatDoesNotFitTheLimitIsRefusedNamingBoth) {
  const auto msg = error_of("slurm: {time: '00:03:00'}\nslurm_signal_margin: 300\n");
  for (const char* words : {"slurm_signal_margin 300 s", "slurm: time 00:03:00 (180 s)", "60 s"})
    EXPECT_NE(msg.find(words), std::string::npos) << words << ": " << msg;
  // 60 s of limit leave less than 60 s before even the default margin (10 s).
  EXPECT_NE(error_of("slurm: {time: 1}\n").find("slurm_signal_margin 10 s (the default"), std::string::npos);
  EXPECT_EQ(error_of("slurm: {time: 2}\nslurm_signal_margin: 60\n"), "no error");  // 60 s left: fits
  EXPECT_NE(error_of("slurm: {time: 2}\nslurm_signal_margin: 61\n").find("does not fit"), std::string::npos);
  EXPECT_NE(error_of("slurm_signal_margin: 0\n").find("between 1 and 65535"), std::string::npos);
  EXPECT_NE(error_of("slurm_signal_margin: 70000\n").find("between 1 and 65535"), std::string::npos);
  EXPECT_NE(error_of("slurm_signal_margin: 1.5\n").find("slurm_signal_margin"), std::string::npos);
  EXPECT_NE(error_of("slurm: {time: soon}\n").find("'soon' is not a Slurm time"), std::string::npos);
  EXPECT_NE(error_of("slurm: {signal: 'B:USR1@60'}\n").find("give slurm_signal_margin"), std::string::npos);
}

// The emitted script under bash, as Slurm would run it: SLURM_ARRAY_* set, `scontrol` a stand-in on
// PATH that records its arguments and says the job is RUNNING, the trainer a stand-in that exits 143
// on SIGTERM (as attnlab train does after its checkpoint).
class SlurmSignals : public SlurmScript {
 protected:
  void SetUp() override {
    SlurmScript::SetUp();
    write("bin/scontrol", "#!/bin/bash\necho \"$*\" >> '" + (dir() / "scontrol.calls").string() +
                              "'\n[ \"$1 $2\" = 'show job' ] && echo \"JobId=8 ArrayJobId=7 ArrayTaskId=0 "
                              "JobState=RUNNING Reason=None\"\nexit 0\n");
    // Saving the checkpoint takes it 0.8 s: a cancel can come meanwhile.
    // It ends by itself after 30 s, so a failing test leaves nothing running.
    write("trainer", "#!/bin/bash\ntrap 'sleep 0.8; exit 143' TERM\ntouch '" + (dir() / "started").string() +
                         "'\nfor i in $(seq 600); do sleep 0.05; done\n");
    fs::permissions(dir() / "bin/scontrol", fs::perms::owner_all, fs::perm_options::add);
    fs::permissions(dir() / "trainer", fs::perms::owner_all, fs::perm_options::add);
    const auto spec = sweep("");
    script_ = emit_slurm(spec, expand_sweep(spec), dir() / "trainer").front();
  }
  // Runs the script, sends it `signals` (names for kill -s) once the trainer runs; its exit status.
  int run_with(const std::vector<std::string>& signals) {
    std::string kills;
    for (const auto& s : signals) kills += "kill -s " + s + " $task; sleep 0.3; ";
    // $! must be the script's bash itself, which the signals are for.
    const std::string cmd = "PATH='" + (dir() / "bin").string() +
                            ":'\"$PATH\" SLURM_ARRAY_JOB_ID=7 SLURM_ARRAY_TASK_ID=0 SLURM_JOB_ID=8 bash '" +
                            script_.string() + "' > '" + (dir() / "task.log").string() +
                            "' 2>&1 & task=$!; for i in $(seq 200); do [ -e '" + (dir() / "started").string() +
                            "' ] && break; sleep 0.05; done; " + kills + "wait $task";
    const int status = std::system(("bash -c \"" + escape(cmd) + "\"").c_str());
    return WEXITSTATUS(status);
  }
  static std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) out += (c == '"' || c == '\\' || c == '$' || c == '`') ? std::string("\\") + c : std::string(1, c);
    return out;
  }
  std::string calls() const { return read_text(dir() / "scontrol.calls"); }
  fs::path script_;
};

TEST_F(SlurmSignals, TheWarningBeforeTheTimeLimitRequeuesTheTask) {
  EXPECT_EQ(run_with({"USR1"}), 143) << read_text(dir() / "task.log");
  EXPECT_NE(calls().find("requeue 7_0"), std::string::npos) << calls();
  EXPECT_NE(read_text(dir() / "task.log").find("requeueing it"), std::string::npos) << read_text(dir() / "task.log");
}

TEST_F(SlurmSignals, ATermFromScancelOrPreemptionNeverRequeues) {
  EXPECT_EQ(run_with({"TERM"}), 143) << read_text(dir() / "task.log");
  EXPECT_EQ(calls().find("requeue"), std::string::npos) << calls();
  EXPECT_NE(read_text(dir() / "task.log").find("not requeued"), std::string::npos) << read_text(dir() / "task.log");
}

TEST_F(SlurmSignals, ACancelAfterTheWarningStillStopsTheTaskForGood) {
  EXPECT_EQ(run_with({"USR1", "TERM"}), 143) << read_text(dir() / "task.log");
  EXPECT_EQ(calls().find("requeue"), std::string::npos) << calls();
}

}  // namespace
}  // namespace attnlab
