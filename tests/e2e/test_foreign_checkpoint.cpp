// End to end: a checkpoint copied into one run's checkpoints/ from another run (another arm) is
// refused by every reader of the run directory, through the real binary (eval, sample, export-hf,
// probe, inject, retention, ablate, activations, and the trainer's resume), each naming the
// checkpoint and both runs with their arms (RunDir::check_own_checkpoint, docs/checkpoints.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attnlab/run_config.h"
#include "attnlab/trainer.h"
#include "e2e/cli.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::ShardSpec;

std::vector<uint16_t> byte_text(int copies) {
  const std::string text = "the cat sat on the mat. ";
  std::vector<uint16_t> tokens;
  for (int i = 0; i < copies; ++i) {
    tokens.push_back(256);  // the bytes tokenizer's separator
    for (unsigned char c : text) tokens.push_back(c);
  }
  return tokens;
}

class ForeignCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    tmp_->write_shard("txt_train_000001.bin", ShardSpec{byte_text(200)});
    tmp_->write_shard("txt_val_000000.bin", ShardSpec{byte_text(40)});
    tmp_->write_text("tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 257, "eot": 256})");
    tmp_->write_text("run.yaml", "model: {n_layer: 2, n_head: 2, d_model: 16, block_size: 16, vocab_size: 257}\n"
                                 "data: {train: '" + tmp_->file("*_train_*.bin") + "', val: '" +
                                     tmp_->file("*_val_*.bin") + "', val_tokens: 512}\n"
                                 "train: {batch_size: 4, seq_len: 8, max_steps: 4, threads: 1, device: cpu}\n"
                                 "optim: {lr: 0.01, warmup_steps: 1}\neval: {every: 4}\ncheckpoint: {every: 2}\n");
    for (const auto& [name, arm] : {std::pair{"a", "sink_token"}, std::pair{"b", "baseline"}})
      ASSERT_EQ(train(config(name, arm)).status, TrainStatus::finished);
    // Run a's step-4 checkpoint, copied over run b's newest.
    fs::remove_all(copied());
    fs::copy(run("a") / "checkpoints/step_000004", copied(), fs::copy_options::recursive);
  }
  static void TearDownTestSuite() { delete tmp_; }

  static fs::path run(const std::string& name) { return tmp_->file(name); }
  static RunConfig config(const std::string& name, const std::string& arm) {
    return load_run_config(tmp_->file("run.yaml"), {"out_dir=" + run(name).string(), "model.arm=" + arm});
  }
  static fs::path copied() { return run("b") / "checkpoints/step_000004"; }

  // `attnlab <args>` fails, naming the copied checkpoint, both runs and both arms.
  static void expect_refused(const std::vector<std::string>& args) {
    const fs::path log = tmp_->file("out.log");
    const int code = testing::run_cli(args, log);
    const std::string out = testing::read(log);
    EXPECT_NE(code, 0) << args[0] << " read the copied checkpoint as run b's:\n" << out;
    for (const std::string& expected :
         std::vector<std::string>{copied().string(), "another run's checkpoint", "arm sink_token",
                                  "out_dir " + run("a").string(), run("b").string() + " is the run (arm baseline"})
      EXPECT_NE(out.find(expected), std::string::npos) << args[0] << ": no \"" << expected << "\" in:\n" << out;
  }

  static testing::TempDir* tmp_;
};
testing::TempDir* ForeignCheckpoint::tmp_ = nullptr;

TEST_F(ForeignCheckpoint, EveryReaderOfTheRunRefusesIt) {
  const std::string b = run("b").string(), out = tmp_->file("outputs");
  expect_refused({"eval", "--checkpoint", b});
  expect_refused({"eval", "--checkpoint", copied().string()});  // named itself, inside run b
  expect_refused({"eval", "--checkpoint", (copied() / "model.safetensors").string()});
  expect_refused({"sample", "--checkpoint", b, "--tokens", "2"});
  expect_refused({"export-hf", "--checkpoint", b, "--out", out + "/hf"});
  EXPECT_FALSE(fs::exists(out + "/hf"));
  expect_refused({"probe", "--checkpoint", b, "--sequences", "2", "--out", out + "/probe"});
  expect_refused({"inject", "--checkpoint", b, "--sequences", "2", "--out", out + "/inject"});
  expect_refused({"retention", "--checkpoint", b, "--batches", "1", "--out", out + "/retention"});
  expect_refused({"ablate", "--checkpoint", b, "--residual", "1", "--channels", "0", "--out", out + "/ablate"});
  expect_refused({"activations", "--runs", b, "--sequences", "2", "--out", out + "/activations"});
  expect_refused({"train", "--config", tmp_->file("run.yaml"), "--set", "out_dir=" + b, "--set", "model.arm=baseline",
                  "--set", "train.max_steps=12"});
}

// The run's own checkpoints still read: the check compares the run, not the file's place.
TEST_F(ForeignCheckpoint, TheRunsOwnCheckpointStillReads) {
  const fs::path log = tmp_->file("own.log");
  EXPECT_EQ(testing::run_cli({"eval", "--checkpoint", (run("b") / "checkpoints/step_000002").string()}, log), 0)
      << testing::read(log);
  EXPECT_EQ(testing::run_cli({"eval", "--checkpoint", run("a").string()}, log), 0) << testing::read(log);
}

}  // namespace
}  // namespace attnlab
