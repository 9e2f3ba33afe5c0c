// Hugging Face interop end to end (docs/interop.md), offline: tiny random GPT-2 and GPT-NeoX models
// built by transformers in-process (tests/interop/hf_reference.py) are imported by `attnlab import-hf`
// and must give transformers' logits, hidden states and activation statistics; every arm exported by
// `attnlab export-hf` must give, in transformers, the loss `attnlab eval` gives; safetensors files
// cross between attnlab and Python bit for bit; lm-evaluation-harness evaluates an exported arm, with
// GPT-2's tokenizer and with the fast tokenizer export-hf writes for a SentencePiece corpus.
// Skipped (with the reason) when the build found no venv python (tests/CMakeLists.txt).
#include "support/build_paths.h"
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "attnlab/activation_capture.h"
#include "attnlab/arm.h"
#include "attnlab/checkpoint.h"
#include "attnlab/hf_interop.h"
#include "attnlab/init.h"
#include "attnlab/run_config.h"
#include "attnlab/run_dir.h"
#include "attnlab/task_file.h"
#include "attnlab/task_scoring.h"
#include "attnlab/trained_run.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kAttnlab = attnlab::test::binary_dir() / "attnlab";
const fs::path kReference = attnlab::test::source_dir() / "tests/interop/hf_reference.py";
const std::string kPython = attnlab::test::python();
constexpr double kTol = 1e-5;

std::string read(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string quoted(const std::vector<std::string>& args) {
  std::string cmd;
  for (const auto& a : args) cmd += " '" + a + "'";
  return cmd;
}

class HfInterop : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tmp_ = new testing::TempDir(); }
  static void TearDownTestSuite() { delete tmp_; }
  void SetUp() override {
    if (kPython.empty() || !fs::exists(kPython)) GTEST_SKIP() << "no venv python (ATTNLAB_PYTHON) at build time";
  }

  static fs::path dir() { return tmp_->path(); }

  // Runs a command with Hugging Face offline and its caches inside the test's directory; the output
  // goes to `log`. Returns the exit code.
  static int run(const std::string& command, const fs::path& log) {
    const std::string env = "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME='" +
                            (dir() / "hf_home").string() + "' ";
    const int status = std::system((env + command + " > '" + log.string() + "' 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }
  // tests/interop/hf_reference.py with `args`; the last JSON line it printed.
  static std::string python(const std::vector<std::string>& args) {
    const fs::path out = dir() / "python.out";
    const int code = run("'" + kPython + "' '" + kReference.string() + "'" + quoted(args), out);
    if (code != 0) ADD_FAILURE() << "hf_reference.py" << quoted(args) << " exited with " << code << ":\n" << read(out);
    std::string text = read(out), last;
    for (std::istringstream lines(text); std::getline(lines, text);)
      if (!text.empty() && (text[0] == '{' || text[0] == '[')) last = text;
    return last.empty() ? "{}" : last;
  }
  // The attnlab binary with `args`; fails the test unless it exits 0. Returns its output.
  static std::string cli(const std::vector<std::string>& args) {
    const fs::path log = dir() / "cli.log";
    const int code = run(kAttnlab.string() + quoted(args), log);
    EXPECT_EQ(code, 0) << "attnlab" << quoted(args) << ":\n" << read(log);
    return read(log);
  }

  // The tiny transformers models and their reference numbers (made once per test process).
  static const json& models() {
    if (models_.is_null()) models_ = json::parse(python({"models", (dir() / "models").string()}));
    return models_;
  }
  // The imported run of model `name` (imported once per test process).
  static fs::path imported(const std::string& name) {
    const fs::path run = dir() / "imported" / name;
    if (!fs::exists(run)) cli({"import-hf", (dir() / "models" / name).string(), "--out", run.string()});
    return run;
  }
  // Two GPT-NeoX revision series and what the analyses must find on them.
  static void make_series() {
    if (!fs::exists(dir() / "series/series_expected.json")) python({"series", (dir() / "series").string()});
  }

  // A micro combo2 run trained a few steps on a SentencePiece corpus that tools/prepare_data.py made
  // (as scripts/prepare_corpus.sh makes the demo's), exported with --tokenizer auto; made once.
  static fs::path sentencepiece_export() {
    const fs::path work = dir() / "sp";
    if (fs::exists(work / "export")) return work;
    python({"sp-corpus", work.string(), "512"});
    std::ofstream(work / "run.yaml")
        << "include: ['" << attnlab::test::source_dir().string() << "/configs/tiers/micro.yaml']\n"
        << "seed: 3\nmodel: {arm: combo2, vocab_size: 512, block_size: 64}\n"
        << "data: {train: '" << (work / "data/*_train_*.bin").string() << "', val: '"
        << (work / "data/*_val_*.bin").string() << "', val_tokens: 512}\n"
        << "train: {batch_size: 4, seq_len: 64, tokens_per_step: 256, max_steps: 6, threads: 1}\n"
        << "optim: {warmup_steps: 2}\neval: {every: 3}\ncheckpoint: {every: 3}\nout_dir: '" << (work / "run").string() << "'\n";
    cli({"train", "--config", (work / "run.yaml").string()});
    cli({"export-hf", "--checkpoint", (work / "run").string(), "--out", (work / "export").string()});
    return work;
  }

  static testing::TempDir* tmp_;
  static json models_;
};
testing::TempDir* HfInterop::tmp_ = nullptr;
json HfInterop::models_;

// ---- import: GPT-2 and GPT-NeoX give transformers' numbers ----------------------------------------

struct Forward {
  at::Tensor logits;
  std::vector<at::Tensor> residual;  // l = 0 .. n_layer
};

Forward forward_with_residuals(GPTImpl& model, const at::Tensor& tokens) {
  Forward f;
  ForwardHooks hooks;
  hooks.on_residual = [&](int64_t, const at::Tensor& x) {
    f.residual.push_back(x.detach().clone());
    return x;
  };
  torch::NoGradGuard no_grad;
  f.logits = model.forward(tokens, &hooks);
  return f;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }

TEST_F(HfInterop, ImportedGpt2AndNeoxGiveTransformersLogitsAndHiddenStates) {
  ASSERT_EQ(models().size(), 5u) << models().dump();
  double worst_logits = 0, worst_hidden = 0;
  for (const auto& name : models()) {
    const fs::path run = imported(name.get<std::string>());
    const auto ref = read_safetensors(dir() / "models" / (name.get<std::string>() + ".reference.safetensors")).tensors;
    auto loaded = open_model(run);
    const auto f = forward_with_residuals(*loaded.model, ref.at("tokens"));
    const int64_t L = loaded.model_config.n_layer;
    ASSERT_EQ(static_cast<int64_t>(f.residual.size()), L + 1);
    worst_logits = std::max(worst_logits, max_diff(f.logits, ref.at("logits")));
    EXPECT_LT(max_diff(f.logits, ref.at("logits")), kTol) << name;
    for (int64_t l = 0; l <= L; ++l) {
      worst_hidden = std::max(worst_hidden, max_diff(f.residual[l], ref.at("hidden." + std::to_string(l))));
      EXPECT_LT(max_diff(f.residual[l], ref.at("hidden." + std::to_string(l))), kTol) << name << " layer " << l;
    }
    EXPECT_LT(max_diff(loaded.model->ln_f(f.residual[L]), ref.at("final_normed")), kTol) << name;
    EXPECT_GT(ref.at("logits").abs().max().item<double>(), 0.5) << "the reference logits must not be trivially small";

    const auto& m = loaded.model_config;
    const bool neox = name.get<std::string>().rfind("neox", 0) == 0;
    EXPECT_EQ(m.rotary_dims(), neox ? 4 : 0) << name;  // rotary_pct 0.25 of head_dim 16
    EXPECT_EQ(m.parallel_residual, name == "neox_parallel" || name == "neox_tied_tanh") << name;
    EXPECT_EQ(m.untied_head, name == "gpt2_untied_erf" || name == "neox_parallel" || name == "neox_sequential") << name;
    EXPECT_EQ(m.gelu, name == "gpt2" || name == "neox_tied_tanh" ? GeluKind::tanh : GeluKind::erf) << name;
    EXPECT_EQ(loaded.step, 0);
    EXPECT_FALSE(fs::exists(run / "checkpoints/step_000000/optimizer.safetensors"));
  }
  std::cout << "max |logits - transformers'| = " << worst_logits << ", max |hidden - transformers'| = " << worst_hidden << "\n";
}

TEST_F(HfInterop, ActivationStatisticsEqualThoseOfTransformersHiddenStates) {
  for (const auto& name : models()) {
    const fs::path run = imported(name.get<std::string>());
    const auto ref = read_safetensors(dir() / "models" / (name.get<std::string>() + ".reference.safetensors")).tensors;
    const json want = json::parse(read(dir() / "models" / (name.get<std::string>() + ".stats.json")));
    auto loaded = open_model(run);
    const auto got = capture_activations(*loaded.model, ref.at("tokens"));
    ASSERT_EQ(got.layers.size(), want.size());
    for (const auto& w : want) {
      const auto& g = got.layers[w["layer"].get<size_t>()];
      for (const auto& [state, stats] : {std::pair{"sink", &g.sink}, std::pair{"peak", &g.peak}}) {
        const auto& e = w[state];
        EXPECT_NEAR(stats->max_abs, e["max_abs"].get<double>(), kTol * e["max_abs"].get<double>()) << name << state;
        EXPECT_NEAR(stats->median_abs, e["median_abs"].get<double>(), kTol * e["median_abs"].get<double>()) << name;
        EXPECT_NEAR(stats->ratio, e["ratio"].get<double>(), kTol * e["ratio"].get<double>()) << name << state;
        EXPECT_EQ(stats->argmax, e["argmax"].get<int64_t>()) << name << " " << state << " layer " << g.layer;
      }
      EXPECT_EQ(g.peak_sequence, w["peak_sequence"].get<int64_t>()) << name;
      EXPECT_EQ(g.peak_position, w["peak_position"].get<int64_t>()) << name;
    }
  }
}

TEST_F(HfInterop, ImportedNeoxDecodesWithTheKvCacheAsItsFullForward) {
  models();
  auto loaded = open_model(imported("neox_parallel"));
  const auto tokens = read_safetensors(dir() / "models/neox_parallel.reference.safetensors").tensors.at("tokens");
  torch::NoGradGuard no_grad;
  const auto full = loaded.model->forward(tokens);
  KVCache cache;
  std::vector<at::Tensor> steps = {loaded.model->forward_cached(tokens.narrow(1, 0, 5), cache)};
  for (int64_t t = 5; t < tokens.size(1); ++t) steps.push_back(loaded.model->forward_cached(tokens.narrow(1, t, 1), cache));
  EXPECT_LT(max_diff(at::cat(steps, 1), full), 1e-5);
}

// ---- a checkpoint series: the analyses run over it ---------------------------------------------------

TEST_F(HfInterop, ImportedSeriesGivesTransformersActivationsLockInSpearmanAndJaccard) {
  make_series();
  const json want = json::parse(read(dir() / "series/series_expected.json"));
  const std::string val = (dir() / "series/series_val_*.bin").string();
  std::vector<std::string> runs;
  for (const char* seed : {"1", "2"}) {
    const fs::path run = dir() / "series_runs" / (std::string("s") + seed);
    const auto out = cli({"import-hf", (dir() / "series" / (std::string("seed") + seed)).string(), "--out", run.string(),
                          "--set", std::string("seed=") + seed, "--set", "data.val=" + val, "--set", "train.seq_len=16"});
    std::vector<int64_t> steps;
    for (const auto& c : RunDir(run).checkpoints()) steps.push_back(c.step);
    EXPECT_EQ(steps, (std::vector<int64_t>{0, 1000, 143000})) << out;
    EXPECT_TRUE(fs::exists(run / "checkpoints/step_143000/state.json"));
    EXPECT_EQ(load_run_config(run / "config.yaml").seed, std::stoull(seed));
    runs.push_back(run.string());
  }
  cli({"activations", "--runs", runs[0], runs[1], "--out", (dir() / "series_act").string(), "--sequences", "2", "--top-k", "4"});
  const json got = json::parse(read(dir() / "series_act/activations.json"));
  ASSERT_EQ(got["runs"].size(), 2u);
  for (const auto& run : got["runs"]) {
    const json& w = want["runs"][std::to_string(run["seed"].get<int64_t>())];
    ASSERT_EQ(run["checkpoints"].size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(run["checkpoints"][k]["step"], want["steps"][k]);
      for (const auto& layer : run["checkpoints"][k]["layers"]) {
        const json& e = w["checkpoints"][k][layer["layer"].get<size_t>()];
        for (const char* state : {"sink", "peak"}) {
          EXPECT_NEAR(layer[state]["max_abs"].get<double>(), e[state]["max_abs"].get<double>(), kTol * e[state]["max_abs"].get<double>());
          EXPECT_EQ(layer[state]["argmax"], e[state]["argmax"]) << "step " << want["steps"][k] << " layer " << layer["layer"];
          EXPECT_NEAR(layer[state]["ratio"].get<double>(), e[state]["ratio"].get<double>(), kTol * e[state]["ratio"].get<double>());
        }
      }
    }
    EXPECT_EQ(run["lock_in_step"], w["lock_in"]);
    for (size_t l = 0; l < w["spearman_final"].size(); ++l)
      for (size_t k = 0; k < 3; ++k)
        EXPECT_NEAR(run["spearman_final"][l][k].get<double>(), w["spearman_final"][l][k].get<double>(), 1e-9);
  }
  ASSERT_EQ(got["seed_overlap"].size(), 1u);
  EXPECT_EQ(got["seed_overlap"][0]["jaccard"], want["jaccard"]);
}

TEST_F(HfInterop, EvalProbeInjectAblateAndRetentionAcceptAnImportedCheckpoint) {
  // The series' step-143000 revision alone, with its shard as data.val.
  const fs::path run = dir() / "analyses";
  const std::string val = (dir() / "series/series_val_*.bin").string();
  make_series();
  cli({"import-hf", (dir() / "series/seed1/step143000").string(), "--out", run.string(), "--step", "143000",
       "--set", "data.val=" + val, "--set", "train.seq_len=8", "--set", "optim.weight_decay=0.01"});
  EXPECT_NE(cli({"eval", "--checkpoint", run.string(), "--data", val, "--tokens", "33"}).find("val loss"), std::string::npos);
  cli({"probe", "--checkpoint", run.string(), "--sequences", "2", "--out", (dir() / "analyses_probe").string()});
  cli({"inject", "--checkpoint", run.string(), "--sequences", "2", "--eps", "0.4", "--out", (dir() / "analyses_inject").string()});
  cli({"ablate", "--checkpoint", run.string(), "--residual", "1", "--channels", "top:1", "--batch-size", "2", "--no-ceiling",
       "--out", (dir() / "analyses_ablate").string()});
  const auto retention = cli({"retention", "--checkpoint", run.string(), "--batches", "1", "--batch-size", "2",
                              "--out", (dir() / "analyses_retention").string()});
  EXPECT_NE(retention.find("no optimizer.safetensors"), std::string::npos) << retention;
  const json r = json::parse(read(dir() / "analyses_retention/retention.json"));
  EXPECT_EQ(r["provenance"]["step"], 143000);
  EXPECT_TRUE(r["weights"][0]["G_pre"].is_null());  // preconditioned retention needs AdamW state
  EXPECT_FALSE(r["weights"][0]["G"].is_null());
  EXPECT_EQ(r["weights"][0]["weight_decay"], 0.01);
}

// ---- export: every arm, in transformers, gives attnlab eval's loss --------------------------------------

// A model of `arm` whose every parameter is moved off its initial value, so arm parameters and biases matter.
GPT perturbed_model(const ModelConfig& cfg, uint64_t seed) {
  GPT model(cfg);
  init_parameters(*model, seed);
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(seed);
  for (auto& p : model->parameters()) p.add_(at::normal(0.0, 0.1, p.sizes(), gen));
  model->eval();
  return model;
}

fs::path save_run(const fs::path& run, const GPT& model, const std::string& val, uint64_t seed) {
  RunConfig cfg;
  cfg.seed = seed;
  cfg.model = model->config();
  cfg.data.train = cfg.data.val = val;
  cfg.train.seq_len = 16;
  cfg.train.max_steps = 7;
  cfg.out_dir = run.string();
  TrainState state;
  state.step = 7;
  state.config = cfg;
  return save_weights_checkpoint(RunDir(run).checkpoints_path(), *model, state);
}

double eval_loss(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("val loss ([0-9.]+) nats/token"))) return -1;
  return std::stod(m[1]);
}

TEST_F(HfInterop, EveryArmExportsAndTransformersGivesAttnlabEvalLoss) {
  std::vector<uint16_t> tokens(97);
  uint32_t x = 99;
  for (auto& t : tokens) t = uint16_t((x = x * 1103515245u + 12345u) >> 16) % 100;
  fs::create_directories(dir() / "export");
  tmp_->write_shard("export/val_000000.bin", testing::ShardSpec{tokens});
  tmp_->write_text("export/tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 100})");
  const std::string shard = (dir() / "export/val_000000.bin").string();

  struct Case {
    std::string arm, options, expect_class;
    fs::path out;
    double eval;
  };
  std::vector<Case> cases;
  for (const auto& arm : all_arms()) {
    for (const std::string options : {"gpt2", "neox", "window"}) {
      ModelConfig cfg;
      cfg.arm = arm.name;
      cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 32, cfg.block_size = 32, cfg.vocab_size = 100;
      if (options == "neox") {  // every option at once: rotary, parallel residual, untied head, exact GELU
        cfg.rotary_fraction = 0.25, cfg.rotary_base = 500.0, cfg.parallel_residual = true, cfg.untied_head = true;
        cfg.gelu = GeluKind::erf;
      }
      if (options == "window")  // a local-global pattern with a kept position, over 16-token sequences
        cfg.window = 5, cfg.window_pattern = "LG", cfg.window_keep_first = 1;
      const GPT model = perturbed_model(cfg, 3);
      const fs::path run = dir() / "export" / (arm.name + "_" + options);
      save_run(run, model, shard, 3);
      const fs::path out = dir() / "export_hf" / (arm.name + "_" + options);
      const auto printed = cli({"export-hf", "--checkpoint", run.string(), "--out", out.string()});
      const double loss = eval_loss(cli({"eval", "--checkpoint", run.string(), "--data", shard, "--tokens", "97"}));
      ASSERT_GT(loss, 0) << "no loss printed by attnlab eval";
      const std::string expect = arm.name != "baseline" || options == "window" ? "AttnlabForCausalLM"
                                 : options == "neox"                          ? "GPTNeoXForCausalLM"
                                                                              : "GPT2LMHeadModel";
      cases.push_back({arm.name, options, expect, out, loss});

      // And back: import reads every export form and gives the same parameters (in-process: the
      // import-hf command itself is exercised by the import tests above).
      const HfModel reloaded = read_hf_model(out);
      EXPECT_EQ(reloaded.config.arm, arm.name);
      EXPECT_EQ(reloaded.config.window, cfg.window) << arm.name << " " << options;
      EXPECT_EQ(reloaded.config.window_pattern, cfg.window_pattern) << arm.name << " " << options;
      const auto original = model->named_parameters();
      for (const auto& item : reloaded.model->named_parameters()) {
        auto want = original[item.key()];
        auto got = item.value();
        if (item.key() == "wte.weight" || item.key() == "lm_head.weight") {  // the padded rows are not exported
          want = want.narrow(0, 0, 100), got = got.narrow(0, 0, 100);
        }
        EXPECT_TRUE(torch::equal(got, want)) << arm.name << " " << options << " " << item.key();
      }
    }
  }
  std::vector<std::string> args = {"loss", shard, "16", "97"};
  for (const auto& c : cases) args.push_back(c.out.string());
  const json losses = json::parse(python(args));
  ASSERT_EQ(losses.size(), cases.size());
  double worst = 0;
  for (const auto& c : cases) {
    const json& l = losses[c.out.string()];
    EXPECT_NEAR(l["loss"].get<double>(), c.eval, kTol) << c.arm << " " << c.options;
    worst = std::max(worst, std::abs(l["loss"].get<double>() - c.eval));
    EXPECT_EQ(l["class"], c.expect_class) << c.arm << " " << c.options;
    EXPECT_EQ(l["targets"], 96);
    const json config = json::parse(read(c.out / "config.json"));
    EXPECT_EQ(config["attnlab_provenance"]["arm"], c.arm);
    EXPECT_EQ(config["attnlab_provenance"]["step"], 7);
    EXPECT_EQ(config["attnlab_provenance"]["seed"], 3);
    EXPECT_EQ(config["attnlab_provenance"]["config_hash"].get<std::string>().size(), 16u);
    EXPECT_EQ(config.contains("auto_map"), c.expect_class == "AttnlabForCausalLM") << c.arm;
    EXPECT_EQ(config.contains("window"), c.options == "window") << c.arm << " " << c.options;
    EXPECT_FALSE(fs::exists(c.out / "vocab.json")) << "the run's tokenizer is bytes: no GPT-2 files";
  }
  std::cout << cases.size() << " exports: max |transformers loss - attnlab eval loss| = " << worst << " nats\n";
  // transformers' generate on the modeling code: greedy decoding is the argmax of the logits, step by step.
  python({"generate", (dir() / "export_hf/combo_gpt2").string(), (dir() / "export_hf/sink_token_neox").string()});
}

// ---- safetensors: attnlab <-> Python, bit for bit --------------------------------------------------------

// The tensor whose raw bytes are (37 i + offset) mod 256 (mod 2 for bool), as hf_reference.py makes it.
at::Tensor byte_pattern(at::ScalarType type, std::vector<int64_t> shape, int offset) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<uint8_t> bytes(n * static_cast<int64_t>(c10::elementSize(type)));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t((37 * i + offset) % (type == at::kBool ? 2 : 256));
  return at::from_blob(bytes.data(), shape, at::TensorOptions().dtype(type)).clone();
}

TEST_F(HfInterop, SafetensorsFilesCrossBetweenAttnlabAndPythonBitForBit) {
  const std::vector<std::pair<std::string, at::ScalarType>> dtypes = {
      {"float64", at::kDouble}, {"float32", at::kFloat}, {"float16", at::kHalf}, {"bfloat16", at::kBFloat16},
      {"int64", at::kLong},     {"int32", at::kInt},     {"int16", at::kShort}, {"int8", at::kChar},
      {"uint8", at::kByte},     {"bool", at::kBool}};
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {{"matrix", {3, 5}}, {"scalar", {}}, {"empty", {0, 4}}};
  TensorMap tensors;
  for (const auto& [name, type] : dtypes)
    for (const auto& [kind, shape] : shapes) tensors[name + "." + kind] = byte_pattern(type, shape, 11);
  write_safetensors(dir() / "attnlab.safetensors", tensors, {{"format", "pt"}, {"written_by", "attnlab"}});
  python({"safetensors", (dir() / "attnlab.safetensors").string(), (dir() / "python.safetensors").string()});

  const auto from_python = read_safetensors(dir() / "python.safetensors");
  EXPECT_EQ(from_python.metadata, (SafetensorsMetadata{{"written_by", "python"}}));
  ASSERT_EQ(from_python.tensors.size(), tensors.size());
  for (const auto& [name, type] : dtypes) {
    for (const auto& [kind, shape] : shapes) {
      const auto& got = from_python.tensors.at(name + "." + kind);
      const auto want = byte_pattern(type, shape, 101);
      ASSERT_EQ(got.scalar_type(), type) << name;
      ASSERT_EQ(got.sizes(), want.sizes()) << name << "." << kind;
      EXPECT_EQ(std::memcmp(got.data_ptr(), want.data_ptr(), want.nbytes()), 0) << name << "." << kind;
    }
  }
}

// ---- GPT-2's tokenizer files and lm-evaluation-harness ---------------------------------------------------

fs::path cached_gpt2_vocabulary() {
  if (const char* f = std::getenv("ATTNLAB_GPT2_TIKTOKEN"); f && *f) return f;
  return fs::path(std::getenv("HOME") ? std::getenv("HOME") : "") / ".cache/attnlab/gpt2/gpt2.tiktoken";
}

// The model the lm-eval tests export: combo, 2 layers of width 32, GPT-2's vocabulary.
ModelConfig lm_eval_model() {
  ModelConfig cfg;
  cfg.arm = "combo";
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 32, cfg.block_size = 64, cfg.vocab_size = 50257;
  return cfg;
}

TEST_F(HfInterop, LmEvalEvaluatesAnExportedArmOfflineWithGpt2Tokenizer) {
  const fs::path vocab = cached_gpt2_vocabulary();
  if (!fs::exists(vocab)) GTEST_SKIP() << "no cached GPT-2 vocabulary at " << vocab << " (scripts/setup.sh fetches it)";
  const ModelConfig cfg = lm_eval_model();
  const fs::path run = dir() / "lm_eval_run";
  // data.val in a directory without tokenizer.json: llm.c's shards, GPT-2 BPE assumed.
  save_run(run, perturbed_model(cfg, 5), (dir() / "no_shards_here/val_*.bin").string(), 5);
  const fs::path out = dir() / "lm_eval_export";
  const auto printed = cli({"export-hf", "--checkpoint", run.string(), "--out", out.string()});  // --tokenizer auto
  for (const char* f : {"vocab.json", "merges.txt", "tokenizer_config.json", "modeling_attnlab.py"})
    EXPECT_TRUE(fs::exists(out / f)) << f << "\n" << printed;
  python({"tokenizer", out.string(), vocab.string()});
  const json r = json::parse(python({"lm-eval", out.string(), (dir() / "lm_eval_work").string()}));
  EXPECT_EQ(r.value("docs", 0), 4) << r.dump();
}

// The trainer's downstream scorer (docs/downstream.md) against lm-evaluation-harness on the same model
// and items: lm_eval on the export, attnlab's scorer on the run, the items converted to ids by
// tools/task_convert.py; every choice's log-likelihood, acc and acc_norm agree.
TEST_F(HfInterop, TaskScorerAgreesWithLmEvalOnTheExportedModel) {
  const fs::path vocab = cached_gpt2_vocabulary();
  if (!fs::exists(vocab)) GTEST_SKIP() << "no cached GPT-2 vocabulary at " << vocab << " (scripts/setup.sh fetches it)";
  const ModelConfig cfg = lm_eval_model();
  const fs::path run = dir() / "task_scores_run", out = dir() / "task_scores_export";
  save_run(run, perturbed_model(cfg, 5), (dir() / "no_shards_here/val_*.bin").string(), 5);
  cli({"export-hf", "--checkpoint", run.string(), "--out", out.string()});
  const json r = json::parse(python({"task-scores", out.string(), (dir() / "task_scores_work").string(), vocab.string()}));
  ASSERT_TRUE(r.contains("task_file")) << r.dump();
  const auto task = read_task_file(r["task_file"].get<std::string>(), cfg.vocab_size, cfg.block_size);
  auto model = open_model(run);  // non-const: the scorer runs its forward
  ASSERT_EQ(task.items.size(), r["loglikelihoods"].size());
  for (size_t i = 0; i < task.items.size(); ++i) {
    const auto ll = choice_loglikelihoods(*model.model, task.items[i], torch::kCPU, false);
    ASSERT_EQ(ll.size(), r["loglikelihoods"][i].size());
    for (size_t c = 0; c < ll.size(); ++c) EXPECT_NEAR(ll[c], r["loglikelihoods"][i][c].get<double>(), 1e-4) << i << "," << c;
  }
  const auto counts = score_task(*model.model, task, torch::kCPU, false, 0, 1);
  EXPECT_EQ(double(counts.correct) / counts.n, r["acc"].get<double>());
  EXPECT_EQ(double(counts.correct_norm) / counts.n, r["acc_norm"].get<double>());
}

// One rule for the run's tokenizer (docs/data.md): shards without tokenizer.json and a model of GPT-2's
// vocabulary are GPT-2 BPE for `sample` as for `export-hf` (sample used to refuse what export-hf assumed).
TEST_F(HfInterop, SampleDecodesARunOnShardsWithoutTokenizerJsonAsGpt2AsExportHfTakesIt) {
  const fs::path vocab = cached_gpt2_vocabulary();
  if (!fs::exists(vocab)) GTEST_SKIP() << "no cached GPT-2 vocabulary at " << vocab << " (scripts/setup.sh fetches it)";
  ModelConfig cfg;
  cfg.n_layer = 1, cfg.n_head = 2, cfg.d_model = 32, cfg.block_size = 32, cfg.vocab_size = kGpt2VocabSize;
  const fs::path run = dir() / "gpt2_sample_run";
  save_run(run, perturbed_model(cfg, 9), (dir() / "no_shards_here/val_*.bin").string(), 9);
  const auto printed = cli({"sample", "--checkpoint", run.string(), "--prompt", "Hello world", "--tokens", "3",
                            "--temperature", "0", "--device", "cpu"});
  EXPECT_NE(("\n" + printed).find("\nHello world"), std::string::npos) << printed;  // the prompt, decoded back
  const fs::path out = dir() / "gpt2_sample_export";
  cli({"export-hf", "--checkpoint", run.string(), "--out", out.string()});
  EXPECT_TRUE(fs::exists(out / "vocab.json"));  // the same tokenizer, GPT-2's files
}

// ---- the project's own SentencePiece tokenizer: export and lm-evaluation-harness ---------------------------

TEST_F(HfInterop, ExportHfWritesAFastTokenizerGivingTheSentencePieceCorpusIds) {
  const fs::path work = sentencepiece_export();
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) EXPECT_TRUE(fs::exists(work / "export" / f)) << f;
  // Every document's text encodes to the ids its shard holds (the separator, then its tokens),
  // with transformers alone: sentencepiece and protobuf are made unimportable for the load.
  const json r = json::parse(python({"corpus-ids", (work / "export").string(), (work / "data").string(),
                                     (work / "texts").string()}));
  EXPECT_EQ(r.value("documents", 0), 40) << r.dump();
}

TEST_F(HfInterop, LmEvalRunsTheDocumentedCommandOfflineOnASentencePieceCorpusRun) {
  if (run("'" + kPython + "' -c 'import lm_eval'", dir() / "lm_eval_import.log") != 0)
    GTEST_SKIP() << "lm_eval is not importable by " << kPython << " (scripts/setup.sh installs lm-eval[hf])";
  const fs::path work = sentencepiece_export();
  const json r = json::parse(python({"lm-eval-corpus", (work / "export").string(), (work / "lm_eval").string(),
                                     (work / "data").string()}));
  ASSERT_EQ(r.value("requests", 0), 18) << r.dump();
  // attnlab's own forward on the same tokens gives lm_eval's log p(choice | question).
  auto loaded = open_model(work / "run");
  torch::NoGradGuard no_grad;
  double worst = 0;
  for (const auto& request : json::parse(read(work / "lm_eval/requests.json"))) {
    const auto tokens = request["tokens"].get<std::vector<int64_t>>();
    const auto context = request["context"].get<int64_t>();
    const auto logits = loaded.model->forward(torch::tensor(tokens).unsqueeze(0))[0].to(at::kDouble);
    const auto logprobs = torch::log_softmax(logits, -1);
    double sum = 0;
    for (int64_t i = context; i < static_cast<int64_t>(tokens.size()); ++i) sum += logprobs[i - 1][tokens[i]].item<double>();
    worst = std::max(worst, std::abs(sum - request["lm_eval"].get<double>()));
  }
  EXPECT_LT(worst, 1e-4) << "lm_eval vs attnlab, nats";
  std::cout << "lm_eval vs attnlab: " << worst << " nats; vs transformers: " << r["max_lm_eval_vs_transformers"] << "\n";
}

}  // namespace
}  // namespace attnlab
