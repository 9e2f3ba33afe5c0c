// A fixture of tiny sweeps for end-to-end tests: hand-made byte-level shards, a base config, a
// "tiny" tier (1 layer, d_model 32) and a sweep file over two arms and the given seeds.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e/cli.h"
#include "unit/shard_files.h"

namespace attnlab::testing {

/// metrics.jsonl of a run, one JSON object per line.
inline std::vector<nlohmann::json> metrics(const std::filesystem::path& run) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

class SweepE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kAttnlab)) << kAttnlab << " not built";
    std::filesystem::create_directories(dir() / "data");
    std::filesystem::create_directories(dir() / "tiers");
    std::filesystem::create_directories(dir() / "sweeps");
    tmp_.write_shard("data/toy_val_000000.bin", ShardSpec{iota_tokens(4096, 1, 64)});
    tmp_.write_shard("data/toy_train_000001.bin", ShardSpec{iota_tokens(40000, 5, 64)});
    tmp_.write_text("data/tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 64})");
    std::ofstream(dir() / "base.yaml")
        << "data: {train: '" << (dir() / "data/*_train_*.bin").string() << "', val: '"
        << (dir() / "data/*_val_*.bin").string() << "', val_tokens: 1024}\n"
        << "train: {batch_size: 4, seq_len: 16, tokens_per_step: 64, device: cpu}\n"
        << "optim: {lr: 0.01, warmup_steps: 2}\n";
    std::ofstream(dir() / "tiers/tiny.yaml")
        << "tier: tiny\nmodel: {n_layer: 1, n_head: 2, d_model: 32, block_size: 32, vocab_size: 64}\n";
  }
  std::filesystem::path dir() const { return tmp_.path(); }
  std::filesystem::path sweep_file(int64_t steps, const std::string& seeds, int64_t checkpoint_every = 3) {
    const std::filesystem::path file = dir() / "sweeps/toy.yaml";
    std::ofstream(file) << "base: ../base.yaml\nout: " << (dir() / "out").string() << "\nset:\n  train.max_steps: "
                        << steps << "\n  eval.every: 4\n  checkpoint.every: " << checkpoint_every
                        << "\ngrid:\n  tier: [tiny]\n  model.arm: [baseline, sink_logit]\n  seed: " << seeds << "\n";
    return file;
  }
  TempDir tmp_;
};

}  // namespace attnlab::testing
