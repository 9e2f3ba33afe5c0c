// open_trained(): one way to load a trained model, choose its validation tokens and say so.
#include "attnlab/trained_run.h"

#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "attnlab/attention_self_check.h"
#include "attnlab/device.h"
#include "attnlab/document_windows.h"
#include "attnlab/model.h"
#include "attnlab/run_dir.h"
#include "attnlab/shards.h"
#include "attnlab/version.h"
#include "common/json_field.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

std::string data_pattern(const TokenChoice& choice, const TrainedRun& run, const std::string& source) {
  if (!choice.data.empty()) return choice.data;
  if (run.config) return run.config->data.val;
  throw std::invalid_argument(source + " carries no run config, so no data.val; pass --data <val shards>");
}

int64_t sequence_length(const TokenChoice& choice, const TrainedRun& run, const std::string& source) {
  int64_t T = choice.length;
  if (T <= 0 && run.config) T = run.config->train.seq_len;
  if (T <= 0) throw std::invalid_argument(source + " carries no run config, so no train.seq_len; pass --length");
  const int64_t context = run.model_config.block_size;  // sink_token's token has no position: T may equal it
  if (T > context)
    throw std::invalid_argument("--length " + std::to_string(T) + " exceeds the model's context of " +
                                std::to_string(context) + " text tokens");
  return T;
}

std::vector<Batch> split(const Batch& all, int64_t batch_size) {
  std::vector<Batch> out;
  for (int64_t i = 0; i < all.x.size(0); i += batch_size) {
    const int64_t n = std::min(batch_size, all.x.size(0) - i);
    out.push_back({all.x.narrow(0, i, n), all.y.narrow(0, i, n)});
  }
  return out;
}

// The tokenizer.json beside the shards `pattern` names: in its directory, read whether or not the
// shards are here; a wildcard in the directory part is expanded (the shards must then be here).
TokenizerInfo tokenizer_beside(const std::string& pattern) {
  const fs::path dir = fs::path(pattern).parent_path();
  const std::string name = dir.empty() ? "." : dir.string();
  if (name.find_first_of("*?[") != std::string::npos) return tokenizer_for_pattern(pattern);
  std::error_code ec;
  if (!fs::is_directory(name, ec))
    spdlog::warn("{}: no such directory here (the run's shards {}, relative to where it was trained), so no "
                 "tokenizer.json is read from it",
                 name, pattern);
  return read_tokenizer_info(name);
}

// A run trained on document-aligned windows (data.sampling: document) is judged on the same cut of
// its validation stream, so analyses see BOS at position 0 as training did: the separator of the
// shards `pattern` names (document_windows.h). None for any other run.
std::optional<int64_t> aligned_separator(const TrainedRun& run, const std::string& pattern) {
  if (!run.config || run.config->data.sampling != WindowSampling::document) return std::nullopt;
  return document_separator(tokenizer_beside(pattern), run.model_config.vocab_size, pattern);
}

// The val tokens that hold the first N sequences (--tokens when given): N T + 1 for the consecutive cut;
// up to the end of the N-th aligned window, which may start anywhere, for the aligned one.
int64_t first_tokens(const std::shared_ptr<const ShardSet>& val, const TokenChoice& choice, int64_t T,
                     std::optional<int64_t> separator) {
  if (choice.tokens > 0) return choice.tokens;
  if (!separator) return choice.sequences * T + 1;
  const ValidationSet all(val, T, 0, separator);
  if (all.num_sequences() < choice.sequences) return 0;  // the caller names the shortfall
  return all.start_of(choice.sequences - 1) + T + 1;
}

// The first N validation sequences (every whole one within `tokens` when that is set), or N windows
// drawn with a seed; records which in the provenance.
void choose_tokens(TrainedRun& run, std::shared_ptr<const ShardSet> val, const TokenChoice& choice, int64_t T) {
  auto& p = run.provenance;
  const auto separator = aligned_separator(run, val->pattern());
  const std::string aligned = separator ? " document-aligned (data.sampling: document, separator " +
                                              std::to_string(*separator) + ")" : "";
  if (choice.seed) {
    BatchSampler sampler(val, {choice.sequences, T, *choice.seed, separator});
    p.sequences = choice.sequences;
    p.selection = "windows" + aligned + " drawn by BatchSampler (seed " + std::to_string(*choice.seed) +
                  ", step 0) over the val shards";
    run.batches = split(sampler.batch(0, 0), choice.batch_size);
    return;
  }
  run.validation.emplace(val, T, first_tokens(val, choice, T, separator), separator);
  const int64_t available = run.validation->num_sequences();
  if (choice.tokens <= 0 && available < choice.sequences)
    throw std::invalid_argument(val->pattern() + " holds only " + std::to_string(available) + aligned + " sequences of " +
                                std::to_string(T) + " tokens, fewer than the " + std::to_string(choice.sequences) +
                                " asked for (--sequences, or --batches x --batch-size)");
  p.sequences = choice.tokens > 0 ? available : choice.sequences;
  p.selection = separator ? "the first N" + aligned + " sequences of the val stream (ValidationSet)"
                          : "the first N consecutive sequences of the val stream (ValidationSet)";
  p.val_fingerprint = run.validation->fingerprint();
  run.batches = split(run.validation->sequences(0, p.sequences), choice.batch_size);
}

TokenizerInfo gpt2_assumed(const std::string& dir) {
  TokenizerInfo info;
  info.tokenizer = "gpt2";
  info.vocab_size = kGpt2VocabSize;
  info.eot = kGpt2VocabSize - 1;  // <|endoftext|>, before every document of llm.c's shards
  info.dir = dir;
  info.assumed = true;
  return info;
}

// The first-use self-check of the model's attention on the analysis's device (docs/kernels.md), in the
// dtype its kernels see there, before the weights move to it.
void check_attention(TrainedRun& run, const OpenOptions& options) {
  if (!run.device.is_cuda() && !options.self_check_on_cpu) return;
  SelfCheckCase c;
  c.arm = run.model->arm(), c.backend = run.model->h[0]->as<Block>()->attn->backend, c.device = run.device;
  c.dtype = run.autocast ? at::kBFloat16 : at::kFloat, c.head_dim = run.model_config.head_dim();
  run.provenance.attention_self_check = first_use_self_check(c, options.self_check);
}

}  // namespace

TokenizerInfo run_tokenizer(const std::optional<RunConfig>& config, int64_t vocab_size) {
  TokenizerInfo found;  // unknown
  if (config) {
    for (const auto* pattern : {&config->data.train, &config->data.val}) {
      if (pattern->empty()) continue;
      auto info = tokenizer_beside(*pattern);
      if (!info.assumed) return info;
      if (found.dir.empty()) found = std::move(info);
    }
  }
  return vocab_size == kGpt2VocabSize ? gpt2_assumed(found.dir) : found;
}

LoadedModel open_model(const fs::path& path) {
  if (RunDir::is_run(path)) return RunDir(path).latest_model();
  std::error_code ec;
  if (fs::is_directory(path, ec) && !is_checkpoint_dir(path))
    throw CheckpointError(path, "is neither a run directory (holding config.yaml or checkpoints/), a checkpoint "
                                "directory nor a model.safetensors file");
  LoadedModel loaded = load_model(path);
  // A checkpoint (or its files) named inside a run's checkpoints/ must be that run's, as its newest is.
  if (const auto run = RunDir::containing(fs::absolute(loaded.source)))
    run->check_own_checkpoint(loaded.source, loaded.config);
  return loaded;
}

nlohmann::json to_json(const Provenance& p) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  nlohmann::json j = {{"checkpoint", p.checkpoint},
                      {"step", p.step},
                      {"arm", p.arm},
                      {"tier", opt(p.tier)},
                      {"run_seed", opt(p.run_seed)},
                      {"parent", p.parent ? to_json(*p.parent) : nlohmann::json()},
                      {"data", p.data},
                      {"data_files", p.data_files},
                      {"sequences", p.sequences},
                      {"length", p.length},
                      {"batch_size", p.batch_size},
                      {"probe_seed", opt(p.probe_seed)},
                      {"selection", p.selection},
                      {"val_fingerprint", opt(p.val_fingerprint)},
                      {"device", p.device},
                      {"optimizer_state", opt(p.optimizer_state)},
                      {"dtype", p.dtype},
                      {"attention", p.attention},
                      {"attnlab", p.attnlab}};
  if (p.attention_self_check) j["attention_self_check"] = to_json(*p.attention_self_check);
  return j;
}

Provenance provenance_from_json(const nlohmann::json& j) {
  const std::string w = "provenance";
  Provenance p;
  p.checkpoint = json_field<std::string>(j, "checkpoint", w);
  p.step = json_field<int64_t>(j, "step", w);
  p.arm = json_field<std::string>(j, "arm", w);
  p.tier = json_optional_field<std::string>(j, "tier", w);
  p.run_seed = json_optional_field<uint64_t>(j, "run_seed", w);
  if (!json_field<nlohmann::json>(j, "parent", w).is_null())
    p.parent = ParentRecord{json_field<std::string>(j["parent"], "checkpoint", w + ".parent"),
                            json_field<int64_t>(j["parent"], "step", w + ".parent")};
  p.data = json_field<std::string>(j, "data", w);
  p.data_files = json_field<std::vector<std::string>>(j, "data_files", w);
  p.sequences = json_field<int64_t>(j, "sequences", w);
  p.length = json_field<int64_t>(j, "length", w);
  p.batch_size = json_field<int64_t>(j, "batch_size", w);
  p.probe_seed = json_optional_field<uint64_t>(j, "probe_seed", w);
  p.selection = json_field<std::string>(j, "selection", w);
  p.val_fingerprint = json_optional_field<uint64_t>(j, "val_fingerprint", w);
  p.device = json_field<std::string>(j, "device", w);
  p.optimizer_state = json_optional_field<bool>(j, "optimizer_state", w);
  p.dtype = json_field<std::string>(j, "dtype", w);
  p.attention = json_field<std::string>(j, "attention", w);
  p.attnlab = json_field<std::string>(j, "attnlab", w);
  if (j.contains("attention_self_check"))
    p.attention_self_check = self_check_result_from_json(j.at("attention_self_check"), w + ".attention_self_check");
  return p;
}

const RunConfig& TrainedRun::run_config() const {
  if (!config) throw std::invalid_argument(provenance.checkpoint + " carries no run config; this analysis needs one");
  return *config;
}

TrainedRun open_trained(const fs::path& checkpoint, const OpenOptions& options) {
  const auto& choice = options.tokens;
  if (choice.sequences <= 0 || choice.batch_size <= 0 || choice.tokens < 0)
    throw std::invalid_argument("--sequences, --batch-size and --tokens must be positive");
  TrainedRun run;
  LoadedModel loaded = open_model(checkpoint);
  const std::string source = loaded.source.string();
  run.model = loaded.model;
  run.model_config = loaded.model_config;
  run.config = loaded.config;
  if (options.with_optimizer) {
    if (has_optimizer_state(loaded.source)) {
      run.optimizer = load_checkpoint(loaded.source, /*with_optimizer=*/true);
      run.optimizer->weights.clear();  // the model holds them already
    } else {
      spdlog::warn("{}: no optimizer.safetensors; preconditioned quantities are null", source);
    }
  }

  auto& p = run.provenance;
  p.checkpoint = source;
  p.step = loaded.step;
  p.arm = loaded.model_config.arm;
  if (run.config) p.tier = run.config->tier, p.run_seed = run.config->seed;
  p.parent = loaded.trainer.parent;
  if (options.with_optimizer) p.optimizer_state = run.optimizer.has_value();
  p.data = data_pattern(choice, run, source);
  p.length = sequence_length(choice, run, source);
  p.batch_size = choice.batch_size;
  p.probe_seed = choice.seed;
  p.attnlab = version() + " (" + git_revision() + ")";
  auto val = std::make_shared<const ShardSet>(ShardSet::open(p.data, run.model_config.vocab_size));
  for (const auto& s : val->shards()) p.data_files.push_back(s.path());
  choose_tokens(run, val, choice, p.length);

  run.device = resolve_device(options.device);
  p.device = run.device.str();
  run.autocast = options.autocast && run.device.is_cuda();
  check_attention(run, options);
  run.model->to(run.device);
  run.model->eval();
  return run;
}

}  // namespace attnlab
