// End to end: `attnlab sample` and `attnlab watch` through the real binary on tiny trained runs of
// every arm, with byte-level shards whose tokenizer.json says "bytes" (so the prompt's ids are its
// UTF-8 bytes, known here without a tokenizer library).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/arm.h"
#include "attnlab/checkpoint.h"
#include "attnlab/sampler.h"
#include "attnlab/sweep.h"
#include "attnlab/trainer.h"
#include "attnlab/trained_run.h"
#include "e2e/cli.h"
#include "extra_arm.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::ShardSpec;

using testing::kAttnlab;
using testing::read;
constexpr uint16_t kEot = 256;  // the bytes tokenizer's document separator (tools/prepare_data.py)

// Runs the binary with `args`: stdout to `out`, stderr to `out`.err. Returns the exit code.
int run_cli(const std::vector<std::string>& args, const fs::path& out) {
  return testing::run_cli(args, out, out.string() + ".err");
}

// The venv's Python, as the binary finds it (plot_paths.h venv_python).
fs::path venv_python() {
  if (const char* venv = std::getenv("ATTNLAB_VENV"); venv && *venv) return fs::path(venv) / "bin/python";
  return fs::path(std::getenv("HOME")) / ".cache/attnlab/venv/bin/python";
}

bool python_has(const std::string& module) {
  return std::system((venv_python().string() + " -c 'import " + module + "' 2>/dev/null").c_str()) == 0;
}

// Documents of English text, as bytes, each after the separator.
std::vector<uint16_t> byte_documents(int copies) {
  const std::string text = "the cat sat on the mat and the dog ran to the cat. ";
  std::vector<uint16_t> tokens;
  for (int i = 0; i < copies; ++i) {
    tokens.push_back(kEot);
    for (int k = 0; k < 1 + i % 5; ++k)
      for (unsigned char c : text) tokens.push_back(c);
  }
  return tokens;
}

class SampleWatchE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    const fs::path d = tmp_->path();
    fs::create_directories(d / "data");
    fs::create_directories(d / "sweeps");
    fs::create_directories(d / "tiers");
    tmp_->write_shard("data/txt_val_000000.bin", ShardSpec{byte_documents(20)});
    tmp_->write_shard("data/txt_train_000001.bin", ShardSpec{byte_documents(200)});
    tmp_->write_text("data/tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 257, "eot": 256})");
    std::ofstream(d / "base.yaml") << "data: {train: '" << (d / "data/*_train_*.bin").string() << "', val: '"
                                   << (d / "data/*_val_*.bin").string() << "', val_tokens: 1024}\n"
                                   << "train: {batch_size: 4, seq_len: 32, tokens_per_step: 128, device: cpu}\n"
                                   << "optim: {lr: 0.01, warmup_steps: 2}\n";
    std::ofstream(d / "tiers/tiny.yaml")
        << "tier: tiny\nmodel: {n_layer: 2, n_head: 2, d_model: 32, block_size: 32, vocab_size: 257}\n";
    std::ofstream(d / "sweeps/txt.yaml")
        << "base: ../base.yaml\nout: " << (d / "out").string()
        << "\nset:\n  train.max_steps: 30\n  eval.every: 10\n  checkpoint.every: 30\n"
        << "grid:\n  tier: [tiny]\n  model.arm: [" << testing_extra::registry_arm_yaml_items() << "]\n  seed: [1]\n";
    const auto spec = load_sweep(d / "sweeps/txt.yaml");
    const auto runs = expand_sweep(spec);
    write_manifest(spec, manifest_json(spec, runs, std::vector<RunState>(runs.size()), kAttnlab));
    for (const auto& run : runs) ASSERT_EQ(train(run.resolved).status, TrainStatus::finished);
  }
  static void TearDownTestSuite() { delete tmp_; }
  static fs::path dir() { return tmp_->path(); }
  static fs::path run_dir(const std::string& arm) { return dir() / "out/tiny" / arm / "s1"; }
  static testing::TempDir* tmp_;
};
testing::TempDir* SampleWatchE2E::tmp_ = nullptr;

TEST_F(SampleWatchE2E, GreedySampleOfEveryArmIsTheLibrarysDecodeOfThePromptsBytes) {
  if (!python_has("tiktoken")) GTEST_SKIP() << venv_python() << " lacks the tokenizer libraries (scripts/setup.sh)";
  const std::string prompt = "the cat sat";
  for (const auto& spec : all_arms()) {
    const auto out = dir() / ("greedy_" + spec.name + ".txt");
    ASSERT_EQ(run_cli({"sample", "--checkpoint", run_dir(spec.name).string(), "--prompt", prompt, "--tokens", "20",
                       "--temperature", "0", "--device", "cpu"},
                      out),
              0)
        << read(out.string() + ".err");
    // The same decode by the library: separator, then the prompt's bytes.
    auto loaded = open_model(run_dir(spec.name));
    std::vector<int64_t> context = {kEot};
    for (unsigned char c : prompt) context.push_back(c);
    SamplingOptions greedy;
    greedy.temperature = 0, greedy.max_new_tokens = 20;
    std::string expected = prompt;
    bool ascii = true;
    for (const auto id : generate(*loaded.model, context, greedy)) {
      ascii = ascii && (id < 128 || id == kEot);
      expected += id == kEot ? std::string("<|endoftext|>") : std::string(1, char(id));
    }
    const auto text = read(out);
    if (ascii) {
      EXPECT_EQ(text, expected + "\n") << spec.name;
    } else {
      EXPECT_EQ(text.rfind(prompt, 0), 0u) << spec.name << ": " << text;  // non-ASCII bytes decode as U+FFFD
    }
  }
}

TEST_F(SampleWatchE2E, TheSameSeedGivesTheSameText) {
  if (!python_has("tiktoken")) GTEST_SKIP() << venv_python() << " lacks the tokenizer libraries (scripts/setup.sh)";
  const std::vector<std::string> args = {"sample", "--checkpoint", run_dir("combo2").string(), "--prompt", "the dog",
                                         "--tokens", "40", "--temperature", "1.2", "--top-k", "50", "--seed", "7"};
  ASSERT_EQ(run_cli(args, dir() / "s1.txt"), 0) << read(dir() / "s1.txt.err");
  ASSERT_EQ(run_cli(args, dir() / "s2.txt"), 0);
  EXPECT_EQ(read(dir() / "s1.txt"), read(dir() / "s2.txt"));
  EXPECT_EQ(read(dir() / "s1.txt").rfind("the dog", 0), 0u);
}

TEST_F(SampleWatchE2E, SampleNamesAWrongTokenizer) {
  fs::create_directories(dir() / "other");
  tmp_->write_text("other/tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 300})");
  EXPECT_NE(run_cli({"sample", "--checkpoint", run_dir("baseline").string(), "--tokenizer",
                     (dir() / "other").string(), "--prompt", "x"},
                    dir() / "bad.txt"),
            0);
  EXPECT_NE(read(dir() / "bad.txt.err").find("vocab_size 300"), std::string::npos) << read(dir() / "bad.txt.err");
}

// A prompt that is not UTF-8 is refused naming its byte, without a Python traceback.
TEST_F(SampleWatchE2E, APromptThatIsNotUtf8IsRefusedNamingItsByte) {
  if (!python_has("tiktoken")) GTEST_SKIP() << venv_python() << " lacks the tokenizer libraries (scripts/setup.sh)";
  const fs::path out = dir() / "utf8.txt";
  EXPECT_EQ(run_cli({"sample", "--checkpoint", run_dir("baseline").string(), "--prompt", "ab\xff\xfe", "--tokens", "2"},
                    out),
            1);
  const std::string err = read(out.string() + ".err");
  EXPECT_NE(err.find("the prompt is not valid UTF-8: byte 2 (0xff) of 4"), std::string::npos) << err;
  EXPECT_EQ(err.find("Traceback"), std::string::npos) << err;
}

// Integer flags beyond their type are refused by the CLI, naming the flag; CLI11 alone clamped them.
TEST_F(SampleWatchE2E, IntegerFlagsBeyondTheirTypeAreRefused) {
  const fs::path out = dir() / "range.txt";
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--top-k", "9223372036854775808"}, {"--tokens", "99999999999999999999"},
           {"--seed", "18446744073709551616"}, {"--seed", "-1"}}) {
    EXPECT_NE(run_cli({"sample", "--checkpoint", run_dir("baseline").string(), flag, value}, out), 0) << flag << " " << value;
    const std::string err = read(out) + read(out.string() + ".err");
    EXPECT_NE(err.find(flag), std::string::npos) << err;
    EXPECT_NE(err.find(value), std::string::npos) << err;
  }
}

// A huge --tokens prints from its first tokens on: the text is streamed as it is generated.
TEST_F(SampleWatchE2E, TextIsStreamedAsItIsGenerated) {
  if (!python_has("tiktoken")) GTEST_SKIP() << venv_python() << " lacks the tokenizer libraries (scripts/setup.sh)";
  const fs::path log = dir() / "stream.txt";
  fs::remove(log);
  const pid_t pid = testing::start_cli({"sample", "--checkpoint", run_dir("baseline").string(), "--prompt", "the cat",
                                        "--tokens", "9000000000000000000", "--device", "cpu"},
                                       log);
  // Waits for the prompt and 200 generated bytes (any text after the log line that names the run).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  auto streamed = [&] {
    const std::string text = read(log);
    const size_t at = text.find("the cat", text.find("seed 1"));
    return at != std::string::npos && text.size() > at + 200;
  };
  while (!streamed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int status = 0;
  const bool done = ::waitpid(pid, &status, WNOHANG) == pid;
  if (!done) ::kill(pid, SIGKILL), testing::exit_code(pid);
  EXPECT_FALSE(done) << "the sample ended:\n" << read(log);
  EXPECT_TRUE(streamed()) << "nothing streamed:\n" << read(log);
}

TEST_F(SampleWatchE2E, WatchHandsEveryRunOfTheSweepWithItsTagsToTheScript) {
  // A stand-in for tools/watch_metrics.py that records its arguments.
  tmp_->write_text("record.py", "import json, sys\njson.dump(sys.argv[1:], open(sys.argv[0] + '.json', 'w'))\n");
  ASSERT_EQ(run_cli({"watch", (dir() / "out").string(), "--tensorboard", (dir() / "tb").string(), "--follow",
                     "--python", "/usr/bin/python3", "--script", (dir() / "record.py").string()},
                    dir() / "w.txt"),
            0)
      << read(dir() / "w.txt.err");
  const auto argv = nlohmann::json::parse(read(dir() / "record.py.json"));
  std::set<std::string> arms;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--run") {
      const auto run = nlohmann::json::parse(argv[i + 1].get<std::string>());
      EXPECT_EQ(run["tier"], "tiny");
      EXPECT_EQ(run["seed"], 1);
      EXPECT_EQ(run["name"], "tiny/" + run["arm"].get<std::string>() + "/s1");
      EXPECT_EQ(fs::path(run["dir"].get<std::string>()), run_dir(run["arm"].get<std::string>()));
      arms.insert(run["arm"].get<std::string>());
    }
  }
  EXPECT_EQ(arms.size(), testing_extra::registry_arm_names().size());
  const auto has = [&](const std::string& a) { return std::find(argv.begin(), argv.end(), a) != argv.end(); };
  EXPECT_TRUE(has("--follow"));
  EXPECT_TRUE(has((dir() / "tb").string()));
  EXPECT_TRUE(has("out"));  // --group: the sweep directory's name
}

// One run of a sweep is named by its path in the sweep, as when the sweep is watched: two runs'
// "s1" directories must not become one TensorBoard run.
TEST_F(SampleWatchE2E, WatchNamesOneRunOfASweepByItsPathInTheSweep) {
  tmp_->write_text("record.py", "import json, sys\njson.dump(sys.argv[1:], open(sys.argv[0] + '.json', 'w'))\n");
  for (const std::string arm : {"baseline", "sink_logit"}) {
    ASSERT_EQ(run_cli({"watch", run_dir(arm).string() + "/", "--tensorboard", (dir() / "tb").string(), "--python",
                       "/usr/bin/python3", "--script", (dir() / "record.py").string()},
                      dir() / "w.txt"),
              0)
        << read(dir() / "w.txt.err");
    const auto argv = nlohmann::json::parse(read(dir() / "record.py.json"));
    const auto at = std::find(argv.begin(), argv.end(), "--run");
    ASSERT_NE(at, argv.end());
    EXPECT_EQ(nlohmann::json::parse((at + 1)->get<std::string>())["name"], "tiny/" + arm + "/s1");
  }
  // A run directory outside any sweep keeps its own name.
  fs::create_directories(dir() / "alone");
  fs::copy(run_dir("baseline"), dir() / "alone/s7", fs::copy_options::recursive);
  ASSERT_EQ(run_cli({"watch", (dir() / "alone/s7").string(), "--tensorboard", (dir() / "tb").string(), "--python",
                     "/usr/bin/python3", "--script", (dir() / "record.py").string()},
                    dir() / "w.txt"),
            0)
      << read(dir() / "w.txt.err");
  const auto argv = nlohmann::json::parse(read(dir() / "record.py.json"));
  EXPECT_EQ(nlohmann::json::parse((std::find(argv.begin(), argv.end(), "--run") + 1)->get<std::string>())["name"], "s7");
}

// The runs are found without reading their metrics.jsonl (a FIFO would block that for ever): the
// follower opens it without blocking and names it.
TEST_F(SampleWatchE2E, WatchNamesAFifoWhereMetricsBelongInsteadOfHanging) {
  if (!fs::exists(venv_python())) GTEST_SKIP() << venv_python() << " is missing (scripts/setup.sh)";
  const fs::path run = dir() / "fifo/s1";
  fs::create_directories(run.parent_path());
  fs::copy(run_dir("baseline"), run, fs::copy_options::recursive);
  fs::remove(run / "metrics.jsonl");
  ASSERT_EQ(::mkfifo((run / "metrics.jsonl").c_str(), 0644), 0);
  EXPECT_EQ(run_cli({"watch", run.string(), "--tensorboard", (dir() / "tb_fifo").string(), "--follow", "--poll", "0.1"},
                    dir() / "w4.txt"),
            1);
  EXPECT_NE(read(dir() / "w4.txt.err").find("metrics.jsonl is a FIFO"), std::string::npos) << read(dir() / "w4.txt.err");
}

TEST_F(SampleWatchE2E, WatchRefusesAPollThatNeverComes) {
  for (const std::string poll : {"inf", "nan", "0", "1e300", "3601"}) {
    EXPECT_NE(run_cli({"watch", run_dir("baseline").string(), "--tensorboard", (dir() / "tb").string(), "--follow",
                       "--poll", poll, "--python", "/usr/bin/python3", "--script", (dir() / "none.py").string()},
                      dir() / "w3.txt"),
              0)
        << poll;
    EXPECT_NE(read(dir() / "w3.txt.err").find("--poll"), std::string::npos) << poll << ": " << read(dir() / "w3.txt.err");
  }
}

TEST_F(SampleWatchE2E, WatchWritesEventsForOneRun) {
  if (!python_has("tensorboard")) GTEST_SKIP() << venv_python() << " has no tensorboard (scripts/setup.sh installs it)";
  ASSERT_EQ(run_cli({"watch", run_dir("sink_logit").string(), "--tensorboard", (dir() / "tb1").string()},
                    dir() / "w1.txt"),
            0)
      << read(dir() / "w1.txt.err");
  int files = 0;  // a run of a sweep is named by its path in the sweep (WatchNamesOneRunOfASweepByItsPathInTheSweep)
  for (const auto& e : fs::directory_iterator(dir() / "tb1/tiny/sink_logit/s1"))
    files += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  EXPECT_EQ(files, 1);
  EXPECT_NE(read(dir() / "w1.txt.err").find("tiny/sink_logit/s1: 30 records (finished)"), std::string::npos)
      << read(dir() / "w1.txt.err");
}

TEST_F(SampleWatchE2E, WatchNeedsADestination) {
  EXPECT_NE(run_cli({"watch", run_dir("baseline").string()}, dir() / "w2.txt"), 0);
  EXPECT_NE(read(dir() / "w2.txt.err").find("--tensorboard"), std::string::npos);
}

}  // namespace
}  // namespace attnlab
