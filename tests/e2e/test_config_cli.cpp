// End to end: config values through the real `attnlab` binary. Leading zeros are decimal, duplicate
// keys and impossible sizes are refused before any work with a message naming the keys (an exit
// code, not a signal), a warm-up not shorter than the run trains with a warning that the run's
// config.yaml records, and byte shards without tokenizer.json train a 256-token model.
#include "support/build_paths.h"
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::ShardSpec;

const fs::path kAttnlab = attnlab::test::binary_dir() / "attnlab";

class ConfigCli : public ::testing::Test {
 protected:
  void SetUp() override {
    // Byte-level shards (ids 0..255) and no tokenizer.json beside them.
    tmp_.write_shard("bytes_train_000001.bin", ShardSpec{testing::iota_tokens(6000, 7, 256)});
    tmp_.write_shard("bytes_val_000000.bin", ShardSpec{testing::iota_tokens(2000, 3, 256)});
    tmp_.write_text("run.yaml", "model: {arm: baseline, n_layer: 1, n_head: 2, d_model: 16, block_size: 16, vocab_size: 256}\n"
                                "data: {train: '" + tmp_.file("*_train_*.bin") + "', val: '" + tmp_.file("*_val_*.bin") +
                                "', val_tokens: 256}\n"
                                "train: {batch_size: 2, seq_len: 8, max_steps: 4, threads: 1}\n"
                                "optim: {lr: 0.01, warmup_steps: 1}\neval: {every: 4}\ncheckpoint: {every: 4}\n"
                                "out_dir: '" + tmp_.file("run") + "'\n");
  }
  // Runs the binary; returns its exit status (-signal when a signal ended it) and keeps its output.
  int run(const std::string& args) {
    const int status = std::system((kAttnlab.string() + " " + args + " > " + tmp_.file("out.log") + " 2>&1").c_str());
    return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
  }
  std::string read(const std::string& path) const {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::string log() const { return read(tmp_.file("out.log")); }
  std::string config() const { return "--config " + tmp_.file("run.yaml"); }
  // For the checks that are not about missing metadata.
  void describe_bytes() const { tmp_.write_text("tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 256})"); }

  testing::TempDir tmp_;
};

TEST_F(ConfigCli, LeadingZerosAreDecimal) {
  ASSERT_EQ(run("config --print " + config() + " --set seed=010 --set train.max_steps=0100"), 0) << log();
  EXPECT_NE(log().find("seed: 10\n"), std::string::npos) << log();
  EXPECT_NE(log().find("  max_steps: 100\n"), std::string::npos) << log();
}

TEST_F(ConfigCli, DuplicateKeysAreRefusedNamingTheLines) {
  tmp_.write_text("dup.yaml", "include: [run.yaml]\noptim:\n  lr: 1.0e-3\n  lr: 3.0e-3\n");
  EXPECT_EQ(run("config --config " + tmp_.file("dup.yaml")), 1);
  EXPECT_NE(log().find(tmp_.file("dup.yaml") + ":4: optim.lr: duplicate key (first at line 3)"), std::string::npos) << log();
}

TEST_F(ConfigCli, OverflowingSizesAreAnErrorNotASignal) {
  EXPECT_EQ(run("train " + config() + " --set train.batch_size=4294967296 --set train.seq_len=4294967296"
                " --set model.block_size=4294967296 --set train.tokens_per_step=0"), 1);
  EXPECT_NE(log().find("train.batch_size * train.seq_len = 4294967296 * 4294967296 overflows"), std::string::npos) << log();
}

TEST_F(ConfigCli, AStepBeyondTheMachineIsRefusedBeforeAnyWork) {
  // 2^40 sequences of 8 tokens: 2^43 tokens of 256 logits at 2 bytes each, 4 PiB, fits no machine.
  describe_bytes();
  EXPECT_EQ(run("train " + config() + " --set train.batch_size=1099511627776"), 1);
  EXPECT_NE(log().find("train.batch_size, train.seq_len, model.vocab_size: a training step needs at least 4.0 PiB"),
            std::string::npos) << log();
  EXPECT_FALSE(fs::exists(tmp_.file("run")));  // nothing claimed, nothing written
}

TEST_F(ConfigCli, StringsEveryWriterCannotWriteAreRefusedBeforeAnyWork) {
  describe_bytes();
  EXPECT_EQ(run("train " + config() + " --set 'tier=a\xff'"), 1);
  EXPECT_NE(log().find("tier: not valid UTF-8"), std::string::npos) << log();
  EXPECT_FALSE(fs::exists(tmp_.file("run")));
}

TEST_F(ConfigCli, WarmupLongerThanTheRunIsWarnedAndRecordedAndBytesWithoutTokenizerJsonTrain) {
  ASSERT_EQ(run("train " + config() + " --set optim.warmup_steps=8"), 0) << log();
  const auto text = log();
  EXPECT_NE(text.find("warning"), std::string::npos) << text;
  EXPECT_NE(text.find("optim.warmup_steps = 8 is not shorter than the run's 4 steps (train.max_steps)"), std::string::npos) << text;
  EXPECT_NE(text.find("no tokenizer.json; the token ids are used as they are, each checked to be below "
                      "model.vocab_size = 256"), std::string::npos) << text;
  EXPECT_EQ(read(tmp_.file("run/config.yaml")).rfind("# warning: optim.warmup_steps = 8 is not shorter", 0), 0u);
  EXPECT_TRUE(fs::exists(tmp_.file("run/final.json")));
}

}  // namespace
}  // namespace attnlab
