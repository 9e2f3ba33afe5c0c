// A fixture of short micro-tier runs for the data-parallel tests (e2e on CPU, gpu on CUDA): the
// micro tier's model (2 layers, d_model 128, vocabulary 4096) on hand-made shards, with a global
// batch of 8 sequences of 64 tokens per step (2 micro-batches of 4 in one process, 1 on each of 2
// ranks), 4 steps, and 31 validation sequences (8 batches of 4, the last short: 4 + 4 per rank).
#pragma once

#include "support/build_paths.h"
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/checkpoint.h"
#include "attnlab/run_config.h"
#include "attnlab/trained_run.h"
#include "unit/process_env.h"

namespace attnlab::testing {

namespace fs = std::filesystem;

inline void write_llmc_shard(const fs::path& path, const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520, header[1] = 1, header[2] = static_cast<int32_t>(tokens.size());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  out.write(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
}

// Short repeating phrases with noise, so the loss and gradients move from step to step.
inline std::vector<uint16_t> phrase_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> out;
  while (out.size() < n) {
    const uint16_t start = rng() % 3000;
    for (uint16_t t = 0; t < 8 && out.size() < n; ++t) out.push_back((start + 7 * t) % 4096);
  }
  return out;
}

/// The source tree (support/build_paths.h).
inline fs::path source_dir() { return attnlab::test::source_dir(); }

inline std::vector<nlohmann::json> metrics_of(const fs::path& run) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

class MicroRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("attnlab_dist_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    write_llmc_shard(dir_ / "data/toy_val_000000.bin", phrase_tokens(4096, 1));
    write_llmc_shard(dir_ / "data/toy_train_000001.bin", phrase_tokens(60000, 2));
    std::ofstream(dir_ / "data/tokenizer.json") << R"({"tokenizer": "sentencepiece", "vocab_size": 4096, "source": "test"})";
    std::ofstream(dir_ / "run.yaml")
        << "include: ['" << (source_dir() / "configs/tiers/micro.yaml").string() << "']\n"
        << "seed: 3\nmodel: {arm: combo2}\n"
        << "data: {train: '" << (dir_ / "data/*_train_*.bin").string() << "', val: '"
        << (dir_ / "data/*_val_*.bin").string() << "', val_tokens: 2048}\n"
        << "train: {batch_size: 4, seq_len: 64, tokens_per_step: 512, max_steps: 4, threads: 1}\n"
        << "optim: {warmup_steps: 2}\neval: {every: 2}\ncheckpoint: {every: 2}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path run(const std::string& name) const { return dir_ / name; }
  RunConfig config(const std::string& out, std::vector<std::string> sets = {}) const {
    sets.push_back("out_dir=" + run(out).string());
    return load_run_config(dir_ / "run.yaml", sets);
  }

  // Steps, losses, gradient norms and validation losses within `tol`, the final weights within
  // `weight_tol` (default `tol`).
  static void expect_same_run(const fs::path& a, const fs::path& b, size_t steps, double tol = 1e-6,
                              double weight_tol = 0) {
    if (weight_tol == 0) weight_tol = tol;
    const auto ma = metrics_of(a), mb = metrics_of(b);
    ASSERT_EQ(ma.size(), steps) << a;
    ASSERT_EQ(mb.size(), steps) << b;  // every step logged once: one rank writes
    for (size_t i = 0; i < steps; ++i) {
      EXPECT_EQ(ma[i]["step"], mb[i]["step"]);
      EXPECT_NEAR(ma[i]["train_loss"].get<double>(), mb[i]["train_loss"].get<double>(), tol) << "step " << i + 1;
      EXPECT_NEAR(ma[i]["grad_norm"].get<double>(), mb[i]["grad_norm"].get<double>(), tol) << "step " << i + 1;
      EXPECT_EQ(ma[i]["val_loss"].is_null(), mb[i]["val_loss"].is_null());
      if (!ma[i]["val_loss"].is_null())
        EXPECT_NEAR(ma[i]["val_loss"].get<double>(), mb[i]["val_loss"].get<double>(), tol) << "step " << i + 1;
    }
    const auto wa = open_model(a), wb = open_model(b);
    for (const auto& item : wa.model->named_parameters()) {
      const auto other = wb.model->named_parameters()[item.key()];
      EXPECT_LT((item.value() - other).abs().max().item<double>(), weight_tol) << item.key();
    }
    EXPECT_EQ(nlohmann::json::parse(std::ifstream(a / "final.json"))["steps"], steps);
    EXPECT_EQ(nlohmann::json::parse(std::ifstream(b / "final.json"))["steps"], steps);
  }

  fs::path dir_;
};

}  // namespace attnlab::testing
