// Twenty optimizer steps of every arm through the trainer (attnlab::train: float32, AdamW, clipping,
// two micro-batches per step) with attention.backend flash against the same run on the reference
// backend: the training losses agree to 1e-5 nats at every step. Float32 round-off differs between
// the backends from step 1 (~1e-7 relative), and twenty AdamW steps carry it without amplifying it
// past that bound; a wrong gradient anywhere moves the losses by 1e-3 or more within a few steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arm_runner.h"
#include "attnlab/trainer.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

class FlashTraining : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    // Counting modulo 64: next token = this one + 1, learnable within a few steps.
    dir_.write_shard("toy_val_000000.bin", {testing::iota_tokens(2048, 7, 64)});
    dir_.write_shard("toy_train_000001.bin", {testing::iota_tokens(20000, 0, 64)});
    dir_.write_text("tokenizer.json", R"({"tokenizer": "sentencepiece", "vocab_size": 64, "source": "test"})");
    dir_.write_text("run.yaml",
                    "model: {n_layer: 2, n_head: 2, d_model: 32, block_size: 32, vocab_size: 64}\n"
                    "data: {train: '" + dir_.file("*_train_*.bin") + "', val: '" + dir_.file("*_val_*.bin") +
                        "', val_tokens: 512}\n"
                        "train: {batch_size: 4, seq_len: 32, tokens_per_step: 256, max_steps: 20, threads: 1}\n"
                        "optim: {lr: 0.01, warmup_steps: 2}\n"
                        "eval: {every: 20}\ncheckpoint: {every: 20, keep_last: 1}\n");
  }

  /// The training loss of every step of a 20-step run of `arm` on `backend`.
  std::vector<double> losses(const std::string& arm, const std::string& backend) {
    const auto out = dir_.file(arm + "_" + backend);
    train(load_run_config(dir_.file("run.yaml"), {"model.arm=" + arm, "attention.backend=" + backend, "out_dir=" + out}));
    std::vector<double> result;
    std::ifstream in(out + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("train_loss")) result.push_back(j["train_loss"].get<double>());
    }
    return result;
  }

  testing::TempDir dir_;
};

TEST_P(FlashTraining, LossesMatchTheReferenceBackendFor20Steps) {
  const auto want = losses(GetParam(), "reference");
  const auto got = losses(GetParam(), "flash");
  ASSERT_EQ(want.size(), 20u);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5) << GetParam() << " step " << i + 1;
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  if (std::getenv("ATTNLAB_PARITY_VERBOSE")) std::cout << "  [parity] " << GetParam() << " worst |loss diff| " << worst << "\n";
  EXPECT_LT(got.back(), got.front() - 0.5) << "the run did not learn";  // the runs train, not merely agree
}

INSTANTIATE_TEST_SUITE_P(AllArms, FlashTraining, ::testing::ValuesIn(testing_extra::registry_arm_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace attnlab
