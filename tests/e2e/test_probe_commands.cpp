// End to end: `attnlab retention` and `attnlab ablate` through the real binary on a tiny trained run.
// The CLI's numbers equal the library's on the same checkpoint and batches; a checkpoint without
// optimizer state gives null preconditioned retention; scale:1 changes nothing; bad input fails
// with a message naming the culprit.
#include "support/build_paths.h"
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "attnlab/batch_sampler.h"
#include "attnlab/checkpoint.h"
#include "attnlab/writer_retention.h"
#include "attnlab/shards.h"
#include "attnlab/trainer.h"
#include "attnlab/run_dir.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::ShardSpec;

const fs::path kAttnlab = attnlab::test::binary_dir() / "attnlab";

std::vector<uint16_t> tokens(size_t n, uint32_t seed) {
  std::vector<uint16_t> out(n);
  uint32_t s = seed;
  for (auto& t : out) t = static_cast<uint16_t>((s = s * 1664525u + 1013904223u) >> 26);  // 0..63
  return out;
}

class ProbeCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_.write_shard("toy_train_000001.bin", ShardSpec{tokens(20000, 1)});
    tmp_.write_shard("toy_val_000000.bin", ShardSpec{tokens(4096, 2)});
    tmp_.write_text("tokenizer.json", R"({"tokenizer": "sentencepiece", "vocab_size": 64, "source": "test"})");
    val_ = tmp_.file("*_val_*.bin");
    tmp_.write_text("run.yaml", "model: {arm: sink_token, n_layer: 2, n_head: 2, d_model: 16, block_size: 16, vocab_size: 64}\n"
                                "data: {train: '" + tmp_.file("*_train_*.bin") + "', val: '" + val_ + "', val_tokens: 512}\n"
                                "train: {batch_size: 4, seq_len: 8, max_steps: 4, threads: 1}\n"
                                "optim: {lr: 0.01, warmup_steps: 1}\neval: {every: 4}\ncheckpoint: {every: 4}\n");
    train(load_run_config(tmp_.file("run.yaml"), {"out_dir=" + tmp_.file("run")}));
  }
  // Runs the binary; returns its exit code and leaves its output in out.log.
  int run(const std::string& args) {
    const std::string cmd = kAttnlab.string() + " " + args + " > " + tmp_.file("out.log") + " 2>&1";
    return WEXITSTATUS(std::system(cmd.c_str()));
  }
  std::string log() {
    std::ifstream in(tmp_.file("out.log"));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static nlohmann::json json(const std::string& path) { return nlohmann::json::parse(std::ifstream(path)); }

  testing::TempDir tmp_;
  std::string val_;
};

TEST_F(ProbeCommands, RetentionEqualsTheLibraryAndIsNullWithoutOptimizerState) {
  ASSERT_EQ(run("retention --checkpoint " + tmp_.file("run") + " --batches 2 --batch-size 2 --top-k 2 --out " +
                tmp_.file("ret")), 0) << log();
  const auto doc = json(tmp_.file("ret/retention.json"));
  EXPECT_EQ(doc["provenance"]["step"], 4);
  EXPECT_EQ(doc["optimizer_step"], 4);
  ASSERT_EQ(doc["weights"].size(), 2u * 2u * 2u);

  const auto ckpt = load_checkpoint(RunDir(tmp_.file("run")).checkpoint_path(4));
  GPT model(ckpt.model_config);
  restore_model(ckpt, *model);
  ValidationSet val(std::make_shared<const ShardSet>(ShardSet::open(val_, 64)), 8, 2 * 2 * 8 + 1);
  RetentionOptions o;
  o.top_k = 2;
  const auto lib = writer_retention(*model, {val.batch(0, 2), val.batch(1, 2)}, &ckpt, o);
  for (size_t i = 0; i < lib.weights.size(); ++i) {
    EXPECT_EQ(doc["weights"][i]["channel"], lib.weights[i].channel);
    EXPECT_NEAR(doc["weights"][i]["G"].get<double>(), lib.weights[i].G, 1e-9 * std::abs(lib.weights[i].G));
    EXPECT_NEAR(doc["weights"][i]["G_pre"].get<double>(), *lib.weights[i].G_pre, 1e-9 * std::abs(*lib.weights[i].G_pre));
    EXPECT_EQ(doc["weights"][i]["weight_decay"], 0.1);
  }
  EXPECT_TRUE(fs::exists(tmp_.file("ret/retention_weights.csv")));
  EXPECT_TRUE(fs::exists(tmp_.file("ret/retention.md")));

  // The same checkpoint without its optimizer file: G stays, G_pre is null, never approximated.
  fs::copy(RunDir(tmp_.file("run")).checkpoint_path(4), tmp_.file("bare"));
  fs::remove(tmp_.file("bare/optimizer.safetensors"));
  ASSERT_EQ(run("retention --checkpoint " + tmp_.file("bare") + " --batches 2 --batch-size 2 --top-k 2 --out " +
                tmp_.file("ret2")), 0) << log();
  const auto bare = json(tmp_.file("ret2/retention.json"));
  EXPECT_TRUE(bare["optimizer_step"].is_null());
  for (size_t i = 0; i < bare["weights"].size(); ++i) {
    EXPECT_TRUE(bare["weights"][i]["G_pre"].is_null());
    EXPECT_EQ(bare["weights"][i]["G"], doc["weights"][i]["G"]);
  }
}

TEST_F(ProbeCommands, AblateScaleOneChangesNothingAndBadInputNamesTheCulprit) {
  ASSERT_EQ(run("ablate --checkpoint " + tmp_.file("run") + " --residual 1 --channels top:2 --mode scale:1 --batch-size 2 "
                "--ceiling-top 4 --ceiling-random 4 --out " + tmp_.file("abl")), 0) << log();
  const auto doc = json(tmp_.file("abl/ablate.json"));
  EXPECT_EQ(doc["change"]["loss"], 0.0);
  EXPECT_EQ(doc["change"]["product_ratio"], 1.0);
  EXPECT_EQ(doc["channels"].size(), 2u);
  EXPECT_EQ(doc["ceiling"]["arms"].size(), 3u);
  EXPECT_EQ(doc["provenance"]["arm"], "sink_token");
  EXPECT_TRUE(fs::exists(tmp_.file("abl/ceiling.csv")));

  EXPECT_NE(run("ablate --checkpoint " + tmp_.file("run") + " --residual 1 --channels 16 --out " + tmp_.file("x")), 0);
  EXPECT_NE(log().find("channel 16 outside [0, 16)"), std::string::npos) << log();
  EXPECT_NE(run("ablate --checkpoint " + tmp_.file("run") + " --residual 3 --channels 1 --out " + tmp_.file("x")), 0);
  EXPECT_NE(log().find("--residual 3"), std::string::npos) << log();
  EXPECT_NE(run("ablate --checkpoint " + tmp_.file("run") + " --residual 1 --channels 1 --mode half --out " + tmp_.file("x")), 0);
  EXPECT_NE(log().find("'half'"), std::string::npos) << log();
  EXPECT_NE(run("retention --checkpoint " + tmp_.file("nothing") + " --out " + tmp_.file("x")), 0);
  EXPECT_NE(log().find(tmp_.file("nothing")), std::string::npos) << log();
}

}  // namespace
}  // namespace attnlab
