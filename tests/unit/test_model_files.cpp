// Files of today's formats read as they were written, bit for bit, and are written again byte for
// byte: two tiny trained checkpoints (one with a sliding window and every architecture option) and
// their export-hf directories, kept in tests/data/model_files/ (its README says how they were made).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/checkpoint.h"
#include "attnlab/hf_interop.h"
#include "attnlab/model.h"
#include "attnlab/safetensors.h"
#include "support/build_paths.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path fixture(const std::string& kind) { return test::source_dir() / "tests/data/model_files" / kind; }

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  EXPECT_TRUE(in) << file;
  return {std::istreambuf_iterator<char>(in), {}};
}

json json_of(const fs::path& file) { return json::parse(bytes_of(file)); }

// The models the fixtures were trained with (tests/data/model_files/README.md).
ModelConfig expected_model(const std::string& kind) {
  ModelConfig m;
  m.n_layer = 2, m.n_head = 2, m.d_model = 8, m.block_size = 16, m.vocab_size = 64;
  if (kind == "plain") {
    m.arm = "combo2";
    return m;
  }
  m.arm = "sink_out_gate";
  m.rotary_fraction = 0.5, m.parallel_residual = true, m.gelu = GeluKind::erf, m.untied_head = true;
  m.window = 5, m.window_pattern = "LG", m.window_keep_first = 1;
  return m;
}

void expect_model(const ModelConfig& got, const ModelConfig& want) {
  EXPECT_EQ(got.arm, want.arm);
  EXPECT_EQ(got.n_layer, want.n_layer);
  EXPECT_EQ(got.n_head, want.n_head);
  EXPECT_EQ(got.d_model, want.d_model);
  EXPECT_EQ(got.block_size, want.block_size);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.routing_gate, want.routing_gate);
  EXPECT_EQ(got.rotary_fraction, want.rotary_fraction);
  EXPECT_EQ(got.rotary_base, want.rotary_base);
  EXPECT_EQ(got.parallel_residual, want.parallel_residual);
  EXPECT_EQ(got.untied_head, want.untied_head);
  EXPECT_EQ(got.gelu, want.gelu);
  EXPECT_EQ(got.window, want.window);
  EXPECT_EQ(got.window_pattern, want.window_pattern);
  EXPECT_EQ(got.window_keep_first, want.window_keep_first);
}

// Every parameter of `model` equals the tensor of the same name in `weights`, bit for bit.
void expect_weights(const GPTImpl& model, const TensorMap& weights) {
  ASSERT_EQ(model.named_parameters().size(), weights.size());
  for (const auto& item : model.named_parameters()) {
    ASSERT_TRUE(weights.count(item.key())) << item.key();
    EXPECT_TRUE(at::equal(item.value(), weights.at(item.key()))) << item.key();
  }
}

class TodaysFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(TodaysFiles, ACheckpointReadsAsWrittenAndIsWrittenAgainByteForByte) {
  const fs::path dir = fixture(GetParam()) / "checkpoint";
  const auto ckpt = load_checkpoint(dir, true);
  expect_model(ckpt.model_config, expected_model(GetParam()));
  ASSERT_TRUE(ckpt.state.config.has_value());
  expect_model(ckpt.state.config->model, expected_model(GetParam()));
  EXPECT_EQ(ckpt.state.step, 2);
  const auto loaded = load_model(ckpt);
  expect_weights(*loaded.model, read_safetensors(dir / "model.safetensors").tensors);

  testing::TempDir tmp;
  const fs::path again = save_weights_checkpoint(tmp.path(), *loaded.model, ckpt.state);
  EXPECT_EQ(bytes_of(again / "model.safetensors"), bytes_of(dir / "model.safetensors"));
  const json written = json_of(again / "state.json"), kept = json_of(dir / "state.json");
  EXPECT_EQ(written["model"].dump(), kept["model"].dump());
  EXPECT_EQ(written["config"].dump(), kept["config"].dump());
}

TEST_P(TodaysFiles, AnExportReadsAsWrittenAndIsWrittenAgainByteForByte) {
  const fs::path dir = fixture(GetParam()) / "export";
  const auto hf = read_hf_model(dir);
  EXPECT_EQ(hf.model_type, "attnlab");
  expect_model(hf.config, expected_model(GetParam()));
  const auto ckpt = load_checkpoint(fixture(GetParam()) / "checkpoint");
  expect_weights(*hf.model, ckpt.weights);  // vocab_size 64 has no padded rows to cut

  testing::TempDir tmp;
  const fs::path out = fs::path(tmp.path()) / "export";
  export_hf(load_model(ckpt), out, {test::source_dir() / "python/attnlab_hf", {}});
  EXPECT_EQ(bytes_of(out / "model.safetensors"), bytes_of(dir / "model.safetensors"));
  json written = json_of(out / "config.json"), kept = json_of(dir / "config.json");
  written.erase("attnlab_provenance"), kept.erase("attnlab_provenance");  // the source path, the build
  EXPECT_EQ(written.dump(2), kept.dump(2));
}

INSTANTIATE_TEST_SUITE_P(Kinds, TodaysFiles, ::testing::Values("plain", "windowed"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace attnlab
