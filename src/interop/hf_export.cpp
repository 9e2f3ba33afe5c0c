// A checkpoint -> a directory transformers loads (export_hf).
#include <fstream>
#include <sstream>

#include "attnlab/hf_interop.h"
#include "attnlab/run_config.h"
#include "attnlab/shards.h"
#include "attnlab/version.h"
#include "checkpoint/file_ops.h"
#include "common/durable_file.h"
#include "interop/fast_tokenizer_files.h"
#include "interop/gpt2_tokenizer_files.h"
#include "interop/hf_config.h"
#include "interop/hf_tensor_names.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kModelingFiles[] = {"configuration_attnlab.py", "modeling_attnlab.py"};

// Where the weights came from: enough to find the run again and to tell two exports apart.
json provenance(const LoadedModel& loaded) {
  json p = {{"arm", loaded.model_config.arm}, {"step", loaded.step},
            {"source", loaded.source.empty() ? "" : fs::absolute(loaded.source).string()}, {"attnlab_version", version()},
            {"attnlab_revision", git_revision()}};
  const auto& cfg = loaded.config;  // a lone model.safetensors may carry none
  p["seed"] = cfg ? json(cfg->seed) : json();
  p["tier"] = cfg ? json(cfg->tier) : json();
  p["config_hash"] = cfg ? json(config_hash(*cfg)) : json();
  return p;
}

void copy_bytes(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) throw CheckpointError(from, "cannot be read (the modeling files of an attnlab export)");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  detail::write_file_durably(to, bytes.str());
}

void check_options(const LoadedModel& loaded, const fs::path& out, HfExportKind kind, const HfExportOptions& options) {
  if (detail::is_file(out) || (detail::is_dir(out) && !detail::list_directory(out).empty())) {
    throw CheckpointError(out, "exists and is not empty; export-hf writes a new directory");
  }
  if (kind == HfExportKind::attnlab) {
    for (const char* name : kModelingFiles) {
      if (!detail::is_file(options.modeling_dir / name)) {
        throw std::invalid_argument("arm '" + loaded.model_config.arm + "' exports with attnlab's modeling code: " +
                                    options.modeling_dir.string() + " must hold configuration_attnlab.py and "
                                    "modeling_attnlab.py (the source tree's python/attnlab_hf; --modeling-dir)");
      }
    }
  }
  if (options.eot < -1 || options.eot >= loaded.model_config.vocab_size) {
    throw std::invalid_argument("the document separator id " + std::to_string(options.eot) + " is outside the model's vocabulary of " +
                                std::to_string(loaded.model_config.vocab_size));
  }
  if (!options.gpt2_tiktoken.empty() && options.fast_tokenizer) {
    throw std::invalid_argument("export-hf writes one tokenizer: GPT-2's files or a fast tokenizer, not both");
  }
  if (!options.gpt2_tiktoken.empty() && loaded.model_config.vocab_size != kGpt2VocabSize) {
    throw std::invalid_argument("GPT-2 tokenizer files need model.vocab_size = 50257, the model has " +
                                std::to_string(loaded.model_config.vocab_size));
  }
}

// Writes every file into `dir` and returns their names.
std::vector<std::string> write_export(const LoadedModel& loaded, HfExportKind kind, const HfExportOptions& options,
                                      const fs::path& dir) {
  const ModelConfig& cfg = loaded.model_config;
  TensorMap tensors;
  for (const auto& item : loaded.model->named_parameters()) {
    const auto target = interop::hf_tensor(kind, item.key());
    tensors[target.name] = interop::to_hf(item.value(), target.layout, cfg.n_head, cfg.vocab_size);
  }
  write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
  json config = interop::hf_config_json(kind, cfg, options.eot);
  config["attnlab_provenance"] = provenance(loaded);
  detail::write_file_durably(dir / "config.json", config.dump(2) + "\n");
  std::vector<std::string> files = {"config.json", "model.safetensors"};
  if (kind == HfExportKind::attnlab) {
    for (const char* name : kModelingFiles) {
      copy_bytes(options.modeling_dir / name, dir / name);
      files.emplace_back(name);
    }
  }
  if (!options.gpt2_tiktoken.empty()) {
    for (auto& name : interop::write_gpt2_tokenizer_files(options.gpt2_tiktoken, dir, cfg.block_size)) files.push_back(name);
  }
  if (options.fast_tokenizer) {
    for (auto& name : interop::write_fast_tokenizer_files(*options.fast_tokenizer, dir, cfg.block_size, cfg.vocab_size))
      files.push_back(name);
  }
  return files;
}

}  // namespace

std::string to_string(HfExportKind kind) {
  switch (kind) {
    case HfExportKind::gpt2: return "gpt2";
    case HfExportKind::gpt_neox: return "gpt_neox";
    case HfExportKind::attnlab: return "attnlab";
  }
  return "?";
}

HfExportKind hf_export_kind(const ModelConfig& config) {
  // transformers' GPT-2 and GPT-NeoX have no sliding window: a windowed model is attnlab's kind.
  if (config.arm != "baseline" || config.has_local_layer()) return HfExportKind::attnlab;
  if (config.rotary_dims() > 0) return HfExportKind::gpt_neox;
  return config.parallel_residual ? HfExportKind::attnlab : HfExportKind::gpt2;
}

HfExportResult export_hf(const LoadedModel& loaded, const fs::path& out, const HfExportOptions& options) {
  HfExportResult result{hf_export_kind(loaded.model_config), {}};
  check_options(loaded, out, result.kind, options);
  fs::path target = fs::absolute(out).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "dir/"
  const fs::path tmp = target.parent_path() / (".tmp." + target.filename().string());
  detail::remove_tree(tmp);  // a crashed export's leftover
  detail::make_directories(tmp);
  try {
    result.files = write_export(loaded, result.kind, options, tmp);
    if (detail::is_dir(target)) detail::remove_tree(target);  // empty (checked above)
    detail::rename_path(tmp, target);
  } catch (...) {
    detail::remove_tree(tmp);
    throw;
  }
  return result;
}

}  // namespace attnlab
