// Hugging Face directories written byte by byte here (config.json + model.safetensors), without
// transformers: the layout conversions of import-hf against index arithmetic, the refusals (each
// naming the culprit), the run-directory rules of import and export, GPT-2's tokenizer files from a
// hand-made rank file. The comparison with transformers itself is tests/e2e/test_hf_interop.cpp.
#include "support/build_paths.h"
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <tuple>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/hf_interop.h"
#include "attnlab/init.h"
#include "attnlab/run_config.h"
#include "attnlab/run_dir.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t V = 70, D = 8, H = 2, L = 1, P = 16;  // vocab, width, heads, layers, positions

// Tensor whose element at flat index i is i + offset: where a value lands tells where it came from.
at::Tensor counting(std::vector<int64_t> shape, double offset) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return torch::arange(n, torch::kFloat).add(offset).reshape(shape);
}

json neox_config() {
  return {{"model_type", "gpt_neox"}, {"hidden_size", D}, {"num_hidden_layers", L}, {"num_attention_heads", H},
          {"intermediate_size", 4 * D}, {"vocab_size", V}, {"max_position_embeddings", P}, {"rotary_pct", 0.5},
          {"rotary_emb_base", 10000}, {"use_parallel_residual", true}, {"tie_word_embeddings", false},
          {"hidden_act", "gelu"}, {"layer_norm_eps", 1e-5}};
}

TensorMap neox_tensors() {
  const std::string l = "gpt_neox.layers.0.";
  return {{"gpt_neox.embed_in.weight", counting({V, D}, 0)},
          {"embed_out.weight", counting({V, D}, 1000)},
          {"gpt_neox.final_layer_norm.weight", counting({D}, 0)},
          {"gpt_neox.final_layer_norm.bias", counting({D}, 0)},
          {l + "input_layernorm.weight", counting({D}, 0)},
          {l + "input_layernorm.bias", counting({D}, 0)},
          {l + "post_attention_layernorm.weight", counting({D}, 0)},
          {l + "post_attention_layernorm.bias", counting({D}, 0)},
          {l + "attention.query_key_value.weight", counting({3 * D, D}, 0)},
          {l + "attention.query_key_value.bias", counting({3 * D}, 0)},
          {l + "attention.dense.weight", counting({D, D}, 0)},
          {l + "attention.dense.bias", counting({D}, 0)},
          {l + "attention.rotary_emb.inv_freq", counting({2}, 0)},  // a buffer older files carry
          {l + "mlp.dense_h_to_4h.weight", counting({4 * D, D}, 0)},
          {l + "mlp.dense_h_to_4h.bias", counting({4 * D}, 0)},
          {l + "mlp.dense_4h_to_h.weight", counting({D, 4 * D}, 0)},
          {l + "mlp.dense_4h_to_h.bias", counting({D}, 0)}};
}

json gpt2_config() {
  return {{"model_type", "gpt2"}, {"n_embd", D}, {"n_layer", L}, {"n_head", H}, {"n_positions", P}, {"vocab_size", V},
          {"activation_function", "gelu_new"}};
}

TensorMap gpt2_tensors() {
  const std::string h = "h.0.";  // old files name them without "transformer."
  return {{"wte.weight", counting({V, D}, 0)},          {"wpe.weight", counting({P, D}, 0)},
          {"ln_f.weight", counting({D}, 0)},            {"ln_f.bias", counting({D}, 0)},
          {h + "ln_1.weight", counting({D}, 0)},        {h + "ln_1.bias", counting({D}, 0)},
          {h + "ln_2.weight", counting({D}, 0)},        {h + "ln_2.bias", counting({D}, 0)},
          {h + "attn.c_attn.weight", counting({D, 3 * D}, 0)}, {h + "attn.c_attn.bias", counting({3 * D}, 0)},
          {h + "attn.c_proj.weight", counting({D, D}, 0)},     {h + "attn.c_proj.bias", counting({D}, 0)},
          {h + "attn.bias", counting({1, 1, P, P}, 0)},  // the causal-mask buffer of old files
          {h + "mlp.c_fc.weight", counting({D, 4 * D}, 0)},    {h + "mlp.c_fc.bias", counting({4 * D}, 0)},
          {h + "mlp.c_proj.weight", counting({4 * D, D}, 0)},  {h + "mlp.c_proj.bias", counting({D}, 0)}};
}

void write_dir(const fs::path& dir, const json& config, const TensorMap& tensors) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump(2);
  write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
}

// Runs f and returns the CheckpointError's message ("" when nothing was thrown).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// An untrained model of `arm` at the file's tiny size, as load_model would return it.
LoadedModel tiny_loaded(const std::string& arm) {
  ModelConfig cfg;
  cfg.arm = arm, cfg.vocab_size = V, cfg.d_model = D, cfg.n_head = H, cfg.n_layer = L, cfg.block_size = P;
  LoadedModel loaded;
  loaded.model = GPT(cfg);
  loaded.model_config = cfg;
  return loaded;
}

class HfFiles : public ::testing::Test {
 protected:
  testing::TempDir tmp_;
  fs::path path(const std::string& name) const { return tmp_.file(name); }
};

TEST_F(HfFiles, NeoxQkvRowsAreRegroupedPerPartAndTheHeadIsPadded) {
  write_dir(path("neox"), neox_config(), neox_tensors());
  const auto m = read_hf_model(path("neox"));
  EXPECT_EQ(m.model_type, "gpt_neox");
  EXPECT_TRUE(m.config.parallel_residual);
  EXPECT_TRUE(m.config.untied_head);
  EXPECT_EQ(m.config.gelu, GeluKind::erf);
  EXPECT_EQ(m.config.rotary_dims(), 2);
  const auto p = m.model->named_parameters();
  // attnlab row part * D + h * hd + i holds GPT-NeoX row h * 3 hd + part * hd + i.
  const int64_t hd = D / H;
  const auto w = p["h.0.attn.c_attn.weight"], b = p["h.0.attn.c_attn.bias"];
  for (int64_t part = 0; part < 3; ++part)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < hd; ++i) {
        const int64_t ours = part * D + h * hd + i, theirs = h * 3 * hd + part * hd + i;
        EXPECT_EQ(b[ours].item<float>(), float(theirs));
        EXPECT_EQ(w[ours][3].item<float>(), float(theirs * D + 3));
      }
  EXPECT_EQ(p["lm_head.weight"].size(0), 128);  // padded_vocab
  EXPECT_TRUE(torch::equal(p["lm_head.weight"].narrow(0, 0, V), counting({V, D}, 1000)));
  EXPECT_EQ(p["lm_head.weight"].narrow(0, V, 128 - V).abs().sum().item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(p["h.0.mlp.c_proj.weight"], counting({D, 4 * D}, 0)));  // Linear: same layout
}

TEST_F(HfFiles, Gpt2Conv1dWeightsAreTransposedAndOldNamesAndBuffersAccepted) {
  write_dir(path("gpt2"), gpt2_config(), gpt2_tensors());
  const auto m = read_hf_model(path("gpt2"));
  EXPECT_FALSE(m.config.untied_head);
  EXPECT_EQ(m.config.rotary_dims(), 0);
  EXPECT_EQ(m.config.gelu, GeluKind::tanh);
  const auto p = m.model->named_parameters();
  const auto fc = p["h.0.mlp.c_fc.weight"];  // [4D, D] from Conv1D [D, 4D]
  for (int64_t out = 0; out < 4 * D; out += 5)
    for (int64_t in = 0; in < D; ++in) EXPECT_EQ(fc[out][in].item<float>(), float(in * 4 * D + out));
  EXPECT_TRUE(torch::equal(p["wpe.weight"], counting({P, D}, 0)));
}

TEST_F(HfFiles, WhatAttnlabCannotComputeExactlyIsRefusedByName) {
  struct Case {
    std::string key;
    json value;
    std::string named;
  };
  const std::vector<Case> neox = {
      {"model_type", "llama", "model_type"},
      {"intermediate_size", 3 * D, "intermediate_size"},
      {"hidden_act", "relu", "hidden_act"},
      {"layer_norm_eps", 1e-6, "layer_norm_eps"},
      {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}, "rope_scaling"},
      {"rotary_pct", 0.1, "rotary"},  // 0 of head_dim 4 rotate
      {"num_attention_heads", 0, "n_head"},  // head_dim would divide by zero (SIGFPE, found by fuzz.import_hf)
      {"num_attention_heads", 3, "n_head"},
  };
  for (const auto& c : neox) {
    json config = neox_config();
    config[c.key] = c.value;
    write_dir(path("bad_" + c.key), config, neox_tensors());
    const auto message = error_of([&] { read_hf_model(path("bad_" + c.key)); });
    EXPECT_NE(message.find(c.named), std::string::npos) << c.key << ": " << message;
    EXPECT_NE(message.find("config.json"), std::string::npos) << message;
  }
  auto missing = neox_tensors();
  missing.erase("gpt_neox.layers.0.mlp.dense_h_to_4h.bias");
  write_dir(path("missing"), neox_config(), missing);
  EXPECT_NE(error_of([&] { read_hf_model(path("missing")); }).find("gpt_neox.layers.0.mlp.dense_h_to_4h.bias"),
            std::string::npos);
  auto extra = neox_tensors();
  extra["gpt_neox.layers.0.mlp.gate_proj.weight"] = counting({D}, 0);
  write_dir(path("extra"), neox_config(), extra);
  EXPECT_NE(error_of([&] { read_hf_model(path("extra")); }).find("gate_proj"), std::string::npos);
  auto misshapen = neox_tensors();
  misshapen["gpt_neox.embed_in.weight"] = counting({V + 1, D}, 0);
  write_dir(path("misshapen"), neox_config(), misshapen);
  EXPECT_NE(error_of([&] { read_hf_model(path("misshapen")); }).find("embed_in"), std::string::npos);

  fs::create_directories(path("pickle"));
  std::ofstream(path("pickle/config.json")) << neox_config().dump();
  std::ofstream(path("pickle/pytorch_model.bin")) << "not read";
  EXPECT_NE(error_of([&] { read_hf_model(path("pickle")); }).find("safetensors"), std::string::npos);
}

TEST_F(HfFiles, ShardedWeightsAreReadThroughTheirIndex) {
  const auto all = neox_tensors();
  TensorMap first, second;
  json map = json::object();
  for (const auto& [name, t] : all) {
    const bool in_first = name.find("layers") == std::string::npos;
    (in_first ? first : second)[name] = t;
    map[name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  fs::create_directories(path("sharded"));
  std::ofstream(path("sharded/config.json")) << neox_config().dump();
  write_safetensors(path("sharded/model-00001-of-00002.safetensors"), first);
  write_safetensors(path("sharded/model-00002-of-00002.safetensors"), second);
  std::ofstream(path("sharded/model.safetensors.index.json")) << json({{"weight_map", map}}).dump();
  write_dir(path("single"), neox_config(), all);
  const auto a = read_hf_model(path("sharded")).model->named_parameters();
  const auto b = read_hf_model(path("single")).model->named_parameters();
  for (const auto& item : a) EXPECT_TRUE(torch::equal(item.value(), b[item.key()])) << item.key();
}

// A tie flag that contradicts the tensors present is refused naming the flag and the tensors, unless
// the contradiction changes nothing (a head equal to the embedding under a tied flag).
TEST_F(HfFiles, ATieFlagContradictingTheTensorsIsRefusedNamingBoth) {
  auto with_head = gpt2_tensors();
  with_head["lm_head.weight"] = counting({V, D}, 5);  // GPT-2 ties by default: this head is not the embedding
  write_dir(path("gpt2_head"), gpt2_config(), with_head);
  auto message = error_of([&] { read_hf_model(path("gpt2_head")); });
  for (const char* named : {"'tie_word_embeddings' is true", "'lm_head.weight'", "'wte.weight'"})
    EXPECT_NE(message.find(named), std::string::npos) << message;
  with_head["lm_head.weight"] = counting({V, D}, 0);  // equal to wte: tied, nothing lost
  write_dir(path("gpt2_same_head"), gpt2_config(), with_head);
  EXPECT_FALSE(read_hf_model(path("gpt2_same_head")).config.untied_head);

  json tied = neox_config();
  tied["tie_word_embeddings"] = true;  // but embed_out.weight differs from embed_in
  write_dir(path("neox_tied"), tied, neox_tensors());
  message = error_of([&] { read_hf_model(path("neox_tied")); });
  for (const char* named : {"'tie_word_embeddings' is true", "'embed_out.weight'", "'gpt_neox.embed_in.weight'"})
    EXPECT_NE(message.find(named), std::string::npos) << message;
  auto headless = neox_tensors();
  headless.erase("embed_out.weight");
  write_dir(path("neox_headless"), neox_config(), headless);  // untied, and no head
  message = error_of([&] { read_hf_model(path("neox_headless")); });
  for (const char* named : {"'tie_word_embeddings' is false", "'embed_out.weight'"})
    EXPECT_NE(message.find(named), std::string::npos) << message;
}

// GPT-NeoX's attention_bias: false with nonzero bias tensors, or true without them, is refused naming
// the flag and a tensor; false with zero biases (or none) builds the model without biases.
TEST_F(HfFiles, AnAttentionBiasFlagContradictingTheTensorsIsRefusedNamingBoth) {
  json no_bias = neox_config();
  no_bias["attention_bias"] = false;
  write_dir(path("biased"), no_bias, neox_tensors());
  auto message = error_of([&] { read_hf_model(path("biased")); });
  for (const char* named : {"'attention_bias' is false", "gpt_neox.layers.0.attention.", ".bias", "and 1 more"})
    EXPECT_NE(message.find(named), std::string::npos) << message;
  auto zero = neox_tensors();
  zero["gpt_neox.layers.0.attention.query_key_value.bias"].zero_();
  zero["gpt_neox.layers.0.attention.dense.bias"].zero_();
  write_dir(path("zero_bias"), no_bias, zero);
  EXPECT_EQ(read_hf_model(path("zero_bias")).model->named_parameters()["h.0.attn.c_attn.bias"].abs().sum().item<float>(), 0);
  auto unbiased = neox_tensors();
  unbiased.erase("gpt_neox.layers.0.attention.query_key_value.bias");
  unbiased.erase("gpt_neox.layers.0.attention.dense.bias");
  write_dir(path("unbiased"), neox_config(), unbiased);  // attention_bias: true by default
  message = error_of([&] { read_hf_model(path("unbiased")); });
  for (const char* named : {"'attention_bias' is true", "gpt_neox.layers.0.attention.query_key_value.bias"})
    EXPECT_NE(message.find(named), std::string::npos) << message;
  write_dir(path("unbiased_said"), no_bias, unbiased);
  EXPECT_EQ(read_hf_model(path("unbiased_said")).model->named_parameters()["h.0.attn.c_proj.bias"].abs().sum().item<float>(), 0);
}

// Sizes the files cannot hold are refused from the headers, before the model is built: 10^9 layers,
// a width of 2^40, GPT-2 positions of 10^12 (a model that would need terabytes). A tensor whose shape
// the config contradicts is refused before its bytes are read.
TEST_F(HfFiles, AConfigTheFilesCannotHoldIsRefusedBeforeTheModelIsBuilt) {
  for (const auto& [key, value] : {std::pair{"num_hidden_layers", int64_t{1000000000}},
                                   std::pair{"hidden_size", int64_t{1} << 40}}) {
    json config = neox_config();
    config[key] = value;
    if (std::string(key) == "hidden_size") config["intermediate_size"] = 4 * value, config["num_attention_heads"] = 2;
    write_dir(path(key), config, neox_tensors());
    const auto message = error_of([&] { read_hf_model(path(key)); });
    EXPECT_NE(message.find("config.json: describes a model of at least"), std::string::npos) << key << ": " << message;
    EXPECT_NE(message.find("declare only 2010 values"), std::string::npos) << message;
  }
  json positions = gpt2_config();
  positions["n_positions"] = int64_t{1000000000000};
  write_dir(path("positions"), positions, gpt2_tensors());
  EXPECT_NE(error_of([&] { read_hf_model(path("positions")); }).find("+ block_size) x d_model"), std::string::npos);
}

// A file that declares more than this machine holds (a sparse file: no byte of it is read) with a
// config to match is refused by the memory it needs, before anything is allocated.
TEST_F(HfFiles, AModelBeyondThisMachinesMemoryIsRefusedBeforeTheModelIsBuilt) {
  const int64_t vocab = int64_t{1} << 33;  // embeddings of 2^36 floats: 256 GiB in the file, twice that in the model
  json config = gpt2_config();
  config["vocab_size"] = vocab;
  auto tensors = gpt2_tensors();
  tensors.erase("wte.weight");
  write_dir(path("huge"), config, tensors);
  // Rewrite the file with wte declared [vocab, D] and its bytes left as a hole.
  json header = json::object();
  uint64_t offset = 0;
  TensorMap all = tensors;
  for (const auto& [name, t] : all) {
    header[name] = {{"dtype", "F32"}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + 4 * t.numel()}}};
    offset += 4 * t.numel();
  }
  header["wte.weight"] = {{"dtype", "F32"}, {"shape", {vocab, D}}, {"data_offsets", {offset, offset + 4 * vocab * D}}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  {
    std::ofstream out(path("huge/model.safetensors"), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << text;
    for (const auto& [name, t] : all) out.write(static_cast<const char*>(t.data_ptr()), 4 * t.numel());
  }
  std::error_code ec;
  fs::resize_file(path("huge/model.safetensors"), 8 + n + offset + 4 * vocab * D, ec);
  if (ec) GTEST_SKIP() << "no sparse file of 256 GiB here: " << ec.message();
  const auto message = error_of([&] { read_hf_model(path("huge")); });
  EXPECT_NE(message.find("more than this machine's"), std::string::npos) << message;
  EXPECT_NE(message.find("vocab_size 8589934592"), std::string::npos) << message;
  fs::remove(path("huge/model.safetensors"));
}

// --step beyond what a run can hold (its step budget times tokens per step overflows) is refused,
// writing nothing, instead of an import whose config.yaml no command can read.
TEST_F(HfFiles, AnImportStepNoRunCanHoldIsRefused) {
  write_dir(path("one"), neox_config(), neox_tensors());
  const auto message = error_of([&] { import_hf(path("one"), path("far"), {INT64_MAX, {}}); });
  EXPECT_NE(message.find("step 9223372036854775807 make a run config that does not validate"), std::string::npos) << message;
  EXPECT_NE(message.find("train.max_steps = 9223372036854775807"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(path("far")));
}

// import-hf holds the run directory's lock while it writes its checkpoints, as a trainer does, and
// lets go when it is done (the claim's RunWriter used to be dropped at once, leaving it unheld).
TEST_F(HfFiles, ImportHoldsTheRunDirectoryWhileItWrites) {
  for (const char* step : {"step0", "step10"}) write_dir(path(std::string("held/") + step), neox_config(), neox_tensors());
  const RunDir run(path("held_run"));
  std::vector<int64_t> held_at;
  HfImportOptions options;
  options.after_save = [&](int64_t step) {
    const auto holder = run.holder();
    ASSERT_TRUE(holder.has_value()) << "nobody holds the directory after step " << step << " was written";
    EXPECT_EQ(holder->pid, static_cast<int64_t>(::getpid()));
    const auto refused = error_of([&] { run.claim(run.config(), /*must_be_new=*/false); });
    EXPECT_NE(refused.find("is held by"), std::string::npos) << refused;
    held_at.push_back(step);
  };
  import_hf(path("held"), run.path(), options);
  EXPECT_EQ(held_at, (std::vector<int64_t>{0, 10}));
  EXPECT_FALSE(run.holder().has_value());  // released once the import is done
  EXPECT_EQ(run.checkpoints().size(), 2u);
}

TEST_F(HfFiles, ImportWritesANewRunOfStepsAndRefusesWhatWouldLoseOrMislabelData) {
  for (const char* step : {"step0", "step512", "step_1000"}) write_dir(path(std::string("series/") + step), neox_config(), neox_tensors());
  fs::create_directories(path("series/.cache"));  // hidden: skipped
  const auto r = import_hf(path("series"), path("run"), {0, {"seed=4", "optim.weight_decay=0.01"}});
  EXPECT_EQ(r.steps, (std::vector<int64_t>{0, 512, 1000}));
  const auto cfg = load_run_config(path("run/config.yaml"));
  EXPECT_EQ(cfg.seed, 4u);
  EXPECT_EQ(cfg.optim.weight_decay, 0.01);
  EXPECT_EQ(cfg.tier, "imported");
  EXPECT_TRUE(cfg.model.untied_head);
  EXPECT_NE(cfg.data.val.find("--set data.val"), std::string::npos);  // a placeholder that says what to do
  const auto ckpt = load_checkpoint(RunDir(path("run")).checkpoint_path(512), false);
  ASSERT_TRUE(ckpt.state.trainer.imported_from.has_value());
  EXPECT_EQ(ckpt.state.trainer.imported_from->model_type, "gpt_neox");

  // An existing run is never written into; a failed import leaves nothing behind.
  EXPECT_NE(error_of([&] { import_hf(path("series"), path("run")); }).find("not empty"), std::string::npos);
  EXPECT_NE(error_of([&] { import_hf(path("series"), path("run2"), {0, {"model.n_layer=3"}}); }).find("model.n_layer"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(path("run2")));
  auto broken = neox_tensors();
  broken.erase("embed_out.weight");
  write_dir(path("series/step2000"), neox_config(), broken);
  EXPECT_NE(error_of([&] { import_hf(path("series"), path("run3")); }).find("embed_out"), std::string::npos);
  EXPECT_FALSE(fs::exists(path("run3")));

  write_dir(path("dup/step10"), neox_config(), neox_tensors());
  write_dir(path("dup/step_000010"), neox_config(), neox_tensors());
  EXPECT_NE(error_of([&] { import_hf(path("dup"), path("run4")); }).find("step 10"), std::string::npos);
  write_dir(path("nameless/final"), neox_config(), neox_tensors());
  EXPECT_NE(error_of([&] { import_hf(path("nameless"), path("run5")); }).find("step number"), std::string::npos);
  json other = neox_config();
  other["use_parallel_residual"] = false;
  write_dir(path("mixed/step1"), neox_config(), neox_tensors());
  write_dir(path("mixed/step2"), other, neox_tensors());
  EXPECT_NE(error_of([&] { import_hf(path("mixed"), path("run6")); }).find("another architecture"), std::string::npos);

  // Not a model: an attnlab run, a directory whose sub-directory is no revision, one without any.
  EXPECT_NE(error_of([&] { import_hf(path("run"), path("run7")); }).find("attnlab run directory"), std::string::npos);
  fs::create_directories(path("notes/drafts"));
  const auto message = error_of([&] { import_hf(path("notes"), path("run7")); });
  EXPECT_NE(message.find(path("notes/drafts").string() + ": has no config.json"), std::string::npos) << message;
  fs::create_directories(path("empty"));
  EXPECT_NE(error_of([&] { import_hf(path("empty"), path("run7")); }).find("neither a model directory"), std::string::npos);
  EXPECT_FALSE(fs::exists(path("run7")));
}

TEST_F(HfFiles, AnAttnlabDirectoryOfAnUnknownOrContradictedArmIsRefusedByName) {
  LoadedModel loaded = tiny_loaded("sink_logit");
  export_hf(loaded, path("good"), {(attnlab::test::source_dir().string() + "/python/attnlab_hf"), {}});
  json config = json::parse(std::ifstream(path("good/config.json")));
  for (const auto& [key, value, named] : {std::tuple{"arm", json("sink_logit_v2"), "unknown attention arm 'sink_logit_v2'"},
                                          std::tuple{"sink", json("none"), "contradicts arm 'sink_logit'"}}) {
    fs::copy(path("good"), path(key));
    json bad = config;
    bad[key] = value;
    std::ofstream(path(key) / "config.json") << bad.dump();
    const auto message = error_of([&] { read_hf_model(path(key)); });
    EXPECT_NE(message.find(named), std::string::npos) << message;
    EXPECT_NE(message.find((path(key) / "config.json").string()), std::string::npos) << message;
  }
}

TEST_F(HfFiles, ExportConfigNamesTheRunsDocumentSeparatorAsBosAndEos) {
  const LoadedModel loaded = tiny_loaded("baseline");
  const auto token_ids = [&](const std::string& name, int64_t eot) {
    HfExportOptions options;
    options.eot = eot;
    export_hf(loaded, path(name), options);
    const json j = json::parse(std::ifstream(path(name) / "config.json"));
    return std::pair{j.at("bos_token_id"), j.at("eos_token_id")};
  };
  // transformers' GPT-2 default (50256) would name a token outside this vocabulary: null unless known.
  EXPECT_EQ(token_ids("unknown", -1), std::pair(json(), json()));
  EXPECT_EQ(token_ids("known", 1), std::pair(json(1), json(1)));
  const auto message = error_of([&] { token_ids("outside", V); });
  EXPECT_NE(message.find("document separator id 70"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(path("outside")));
}

TEST_F(HfFiles, ExportKindFollowsTheArmAndOptions) {
  ModelConfig m;
  EXPECT_EQ(hf_export_kind(m), HfExportKind::gpt2);
  m.rotary_fraction = 0.25;
  EXPECT_EQ(hf_export_kind(m), HfExportKind::gpt_neox);
  m.rotary_fraction = 0, m.parallel_residual = true;  // GPT-2 has no parallel residual, GPT-NeoX no learned positions
  EXPECT_EQ(hf_export_kind(m), HfExportKind::attnlab);
  m.parallel_residual = false, m.arm = "off_by_one";
  EXPECT_EQ(hf_export_kind(m), HfExportKind::attnlab);
}

TEST_F(HfFiles, ExportRefusesANonEmptyDirectoryAndMissingModelingFiles) {
  LoadedModel loaded = tiny_loaded("renorm");
  loaded.source = path("nowhere");
  fs::create_directories(path("full"));
  std::ofstream(path("full/keep.txt")) << "mine";
  EXPECT_NE(error_of([&] { export_hf(loaded, path("full"), {(attnlab::test::source_dir().string() + "/python/attnlab_hf"), {}}); }).find("not empty"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(path("full/keep.txt")));
  EXPECT_NE(error_of([&] { export_hf(loaded, path("out"), {path("no_modeling"), {}}); }).find("modeling_attnlab.py"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(path("out")));
  const auto r = export_hf(loaded, path("out/"), {(attnlab::test::source_dir().string() + "/python/attnlab_hf"), {}});
  EXPECT_EQ(r.kind, HfExportKind::attnlab);
  for (const auto& f : r.files) EXPECT_TRUE(fs::exists(path("out") / f)) << f;
  const auto back = read_hf_model(path("out"));  // and import reads it back, parameter for parameter
  const auto original = loaded.model->named_parameters();
  for (const auto& item : back.model->named_parameters()) {
    const bool embedding = item.key() == "wte.weight";  // its padded rows are not exported
    const auto got = embedding ? item.value().narrow(0, 0, V) : item.value();
    const auto want = embedding ? original[item.key()].narrow(0, 0, V) : original[item.key()];
    EXPECT_TRUE(torch::equal(got, want)) << item.key();
  }
}

// The fast tokenizer's Python missing is an error naming it, and the export leaves nothing behind;
// two tokenizers at once are refused.
TEST_F(HfFiles, ExportNamesAMissingTokenizerPythonAndLeavesNothing) {
  LoadedModel loaded = tiny_loaded("renorm");
  HfExportOptions options{(attnlab::test::source_dir().string() + "/python/attnlab_hf"), {}};
  options.fast_tokenizer = HfFastTokenizer{"bytes", {}, 256, path("no_venv/bin/python"),
                                           (attnlab::test::source_dir().string() + "/tools/hf_tokenizer.py")};
  EXPECT_NE(error_of([&] { export_hf(loaded, path("fast"), options); }).find("no_venv/bin/python"), std::string::npos);
  EXPECT_FALSE(fs::exists(path("fast")));
  for (const auto& entry : fs::directory_iterator(path("fast").parent_path()))
    EXPECT_NE(entry.path().filename().string().rfind(".tmp.", 0), 0u) << entry.path();  // no hidden leftover
  options.gpt2_tiktoken = path("tiny.tiktoken");
  EXPECT_NE(error_of([&] { export_hf(loaded, path("fast"), options); }).find("not both"), std::string::npos);
}

// A rank file of the 256 bytes, then " t" (256), "he" (257), " the" (258): its merges are known.
TEST_F(HfFiles, Gpt2TokenizerFilesComeFromTheRanks) {
  std::string ranks;
  auto base64 = [](const std::string& bytes) {
    static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (size_t i = 0; i < bytes.size(); i += 3) {
      const uint32_t n = (uint8_t(bytes[i]) << 16) | (i + 1 < bytes.size() ? uint8_t(bytes[i + 1]) << 8 : 0) |
                         (i + 2 < bytes.size() ? uint8_t(bytes[i + 2]) : 0);
      out += abc[n >> 18], out += abc[(n >> 12) & 63];
      out += i + 1 < bytes.size() ? abc[(n >> 6) & 63] : '=';
      out += i + 2 < bytes.size() ? abc[n & 63] : '=';
    }
    return out;
  };
  for (int b = 0; b < 256; ++b) ranks += base64(std::string(1, char(b))) + " " + std::to_string(b) + "\n";
  ranks += base64(" t") + " 256\n" + base64("he") + " 257\n" + base64(" the") + " 258\n";
  tmp_.write_text("tiny.tiktoken", ranks);

  ModelConfig cfg;
  cfg.vocab_size = 259;  // not GPT-2's: the files are refused for such a model ...
  LoadedModel loaded;
  loaded.model = GPT(cfg);
  loaded.model_config = cfg;
  EXPECT_NE(error_of([&] { export_hf(loaded, path("tok"), {{}, path("tiny.tiktoken")}); }).find("50257"), std::string::npos);
  cfg.vocab_size = 50257;  // ... and written for GPT-2's
  loaded.model = GPT(cfg);
  loaded.model_config = cfg;
  export_hf(loaded, path("tok"), {{}, path("tiny.tiktoken")});
  std::ifstream merges(path("tok/merges.txt"));
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(merges, line)) lines.push_back(line);
  // GPT-2's alphabet spells the space byte as U+0120 (Ġ, UTF-8 C4 A0).
  EXPECT_EQ(lines, (std::vector<std::string>{"#version: 0.2", "\xC4\xA0 t", "h e", "\xC4\xA0t he"}));
  const json vocab = json::parse(std::ifstream(path("tok/vocab.json")));
  EXPECT_EQ(vocab["\xC4\xA0the"], 258);
  EXPECT_EQ(vocab["a"], int('a'));
  EXPECT_EQ(vocab["\xC4\x80"], 0);  // byte 0 is the first non-printing byte: U+0100
  EXPECT_EQ(vocab["<|endoftext|>"], 259);
  EXPECT_EQ(json::parse(std::ifstream(path("tok/tokenizer_config.json")))["tokenizer_class"], "GPT2Tokenizer");
}

}  // namespace
}  // namespace attnlab
