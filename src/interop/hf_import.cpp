// A Hugging Face model directory -> attnlab's model (read_hf_model). Everything config.json claims is
// checked against the files' headers before the model is built (its size against the values the
// files declare and this machine's memory), and every tensor against the config before its bytes
// are read; a flag that contradicts the tensors present is refused naming both (docs/interop.md).
#include <map>
#include <set>

#include <fmt/format.h>
#include <torch/torch.h>

#include "attnlab/device.h"
#include "attnlab/hf_interop.h"
#include "checkpoint/file_ops.h"
#include "config/sizes.h"
#include "interop/hf_config.h"
#include "interop/hf_tensor_names.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The directory's safetensors file(s) and the tensors their headers declare, by Hugging Face name.
struct HfFiles {
  std::vector<fs::path> files;
  SafetensorsHeader declared;
  std::map<std::string, fs::path> file_of;
};

std::vector<fs::path> weight_files(const fs::path& dir) {
  if (detail::is_file(dir / "model.safetensors")) return {dir / "model.safetensors"};
  const fs::path index = dir / "model.safetensors.index.json";
  if (detail::is_file(index)) {
    const json j = interop::read_json_file(index);
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) throw CheckpointError(index, "has no 'weight_map' object");
    std::set<std::string> shards;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        throw CheckpointError(index, "weight_map['" + name + "'] is not a file name in " + dir.string());
      shards.insert(file.get<std::string>());
    }
    std::vector<fs::path> out;
    for (const auto& shard : shards) out.push_back(dir / shard);
    return out;
  }
  if (detail::is_file(dir / "pytorch_model.bin") || detail::is_file(dir / "pytorch_model.bin.index.json")) {
    throw CheckpointError(dir, "holds its weights only as pytorch_model.bin (a Python pickle); save them as safetensors "
                               "first (docs/interop.md: tools/hf_fetch.py does it)");
  }
  throw CheckpointError(dir, "has no model.safetensors or model.safetensors.index.json");
}

HfFiles read_headers(const fs::path& dir) {
  HfFiles out;
  out.files = weight_files(dir);
  for (const auto& file : out.files) {
    for (auto& [name, entry] : read_safetensors_header(file)) {
      if (out.declared.count(name)) throw CheckpointError(file, "repeats tensor '" + name + "' of " + out.file_of[name].string());
      out.file_of[name] = file;
      out.declared.emplace(name, std::move(entry));
    }
  }
  return out;
}

double numel(const std::vector<int64_t>& shape) {
  double n = 1;
  for (const auto d : shape) n *= double(d);
  return n;
}

// Before any allocation: the model config.json describes must fit in the values the files declare
// (at least n_layer * 12 d_model^2 + (vocab_size + wpe's block_size) * d_model weights, whatever the
// flags) and, with the files' own bytes, in this machine's memory. A config asking for 10^9 layers
// is refused here.
void check_model_size(const ModelConfig& m, const HfFiles& hf, const fs::path& config_file) {
  double values = 0, bytes = 0;
  for (const auto& [name, e] : hf.declared) {
    values += at::isFloatingType(e.dtype) ? numel(e.shape) : 0;
    bytes += numel(e.shape) * double(c10::elementSize(e.dtype));
  }
  const double d = double(m.d_model), layers = double(m.n_layer), vocab = double(m.vocab_size);
  const double positions = m.rotary_dims() > 0 ? 0 : double(m.block_size);  // rows of wpe
  const double at_least = layers * 12 * d * d + (vocab + positions) * d;
  const std::string dims = fmt::format("n_layer {}, d_model {}, vocab_size {}, block_size {}", m.n_layer, m.d_model,
                                       m.vocab_size, m.block_size);
  if (at_least > values) {
    throw CheckpointError(config_file, fmt::format("describes a model of at least {:.4g} weights ({}: n_layer x 12 "
                                                   "d_model^2 + (vocab_size{}) x d_model), but its safetensors files "
                                                   "declare only {:.4g} values: config.json does not describe them",
                                                   at_least, dims, positions > 0 ? " + block_size" : "", values));
  }
  const double model_bytes = 4 * (layers * (12 * d * d + 13 * d) + (2 * vocab + positions) * d);
  const double available = device_memory_bytes(c10::Device(c10::kCPU));
  if (model_bytes + bytes > available) {
    throw CheckpointError(config_file, fmt::format("describes a model ({}) that needs about {} in float32 besides the "
                                                   "files' {}, more than this machine's {} (RAM and swap)",
                                                   dims, sizes::human_bytes(model_bytes), sizes::human_bytes(bytes),
                                                   sizes::human_bytes(available)));
  }
}

bool is_attention_bias(const std::string& name) {
  const auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".attn.c_attn.bias") || ends(".attn.c_proj.bias");
}

// The config.json key that ties the head to the embedding, and its value, in words.
std::string tie_flag(const interop::HfArchitecture& arch) {
  if (arch.kind == HfExportKind::attnlab) return fmt::format("'untied_head' is {}", arch.model.untied_head);
  const char* fallback = arch.kind == HfExportKind::gpt2 ? "true" : "false";
  return fmt::format("'tie_word_embeddings' is {} (the default for {} is {})", !arch.model.untied_head,
                     arch.kind == HfExportKind::gpt2 ? "gpt2" : "gpt_neox", fallback);
}

// The Hugging Face name of attnlab parameter `param` present in the files, or "".
std::string present_name(const interop::HfArchitecture& arch, const HfFiles& hf, const std::string& param) {
  const auto target = interop::hf_tensor(arch.kind, param);
  if (hf.declared.count(target.name)) return target.name;
  for (const auto& alias : interop::hf_aliases(arch.kind, target.name))
    if (hf.declared.count(alias)) return alias;
  return "";
}

// A parameter with its tensor in the files (or none: an absent bias that attention_bias: false zeroes).
struct Placement {
  std::string param, hf_name;
  interop::Layout layout;
};

// Each parameter's tensor, found and its declared shape and dtype checked, before any byte is read.
std::vector<Placement> place(GPTImpl& model, const interop::HfArchitecture& arch, const HfFiles& hf,
                             const fs::path& dir) {
  std::vector<Placement> out;
  for (const auto& item : model.named_parameters()) {
    const auto target = interop::hf_tensor(arch.kind, item.key());
    // attention_bias: false: zeros, as transformers builds it; a bias tensor present is check_leftovers'.
    if (!arch.attention_bias && is_attention_bias(item.key())) continue;
    const std::string name = present_name(arch, hf, item.key());
    if (name.empty()) {
      std::string flag;
      if (item.key() == "lm_head.weight") flag = " (config.json " + tie_flag(arch) + ", so the head is its own tensor)";
      if (is_attention_bias(item.key()) && arch.kind == HfExportKind::gpt_neox)
        flag = " (config.json 'attention_bias' is true, its default: set it false for a model without attention biases)";
      throw CheckpointError(dir, "has no tensor '" + target.name + "' (attnlab's " + item.key() + ")" + flag);
    }
    const auto& declared = hf.declared.at(name);
    const auto want = interop::hf_shape(target.layout, item.value().sizes(), arch.model.vocab_size);
    if (declared.shape != want) {
      throw CheckpointError(hf.file_of.at(name), "tensor '" + name + "' has shape " + c10::str(at::IntArrayRef(declared.shape)) +
                                                     ", expected " + c10::str(at::IntArrayRef(want)) + " from config.json");
    }
    if (!at::isFloatingType(declared.dtype))
      throw CheckpointError(hf.file_of.at(name), "tensor '" + name + "' is not floating point");
    out.push_back({item.key(), name, target.layout});
  }
  return out;
}

TensorMap read_tensors(const HfFiles& hf) {
  TensorMap out;
  for (const auto& file : hf.files)
    for (auto& [name, tensor] : read_safetensors(file).tensors) out.emplace(name, std::move(tensor));
  return out;
}

// What is left once every parameter has its tensor: buffers, and what a flag says transformers does
// not read. Such a tensor is accepted only where it changes nothing (a tied head equal to the
// embedding, zero attention biases under attention_bias: false); otherwise the flag and the tensors
// are named, since the model built would differ from the one transformers builds from these files.
void check_leftovers(const interop::HfArchitecture& arch, const TensorMap& left, const at::Tensor& embedding,
                     const std::string& embedding_name, const HfFiles& hf) {
  std::vector<std::string> nonzero_biases;
  for (const auto& [name, tensor] : left) {
    if (interop::is_hf_buffer(name)) continue;  // transformers ignores these too
    const bool head = name == "lm_head.weight" || name == "embed_out.weight";
    if (head && !arch.model.untied_head) {
      if (tensor.sizes() == embedding.sizes() && torch::equal(tensor.to(at::kFloat), embedding.to(at::kFloat))) continue;
      throw CheckpointError(hf.file_of.at(name), fmt::format("holds a head '{}' that differs from the embedding '{}', "
                                                             "but config.json {}, so the head is the embedding: set "
                                                             "the flag to untie them, or drop the tensor",
                                                             name, embedding_name, tie_flag(arch)));
    }
    if (!arch.attention_bias && arch.kind == HfExportKind::gpt_neox &&
        (name.find(".attention.query_key_value.bias") != std::string::npos ||
         name.find(".attention.dense.bias") != std::string::npos)) {
      if (!torch::any(tensor != 0).item<bool>()) continue;
      nonzero_biases.push_back(name);
      continue;
    }
    throw CheckpointError(hf.file_of.at(name), "holds tensor '" + name + "', which attnlab's model has no place for");
  }
  if (!nonzero_biases.empty()) {
    throw CheckpointError(hf.file_of.at(nonzero_biases[0]),
                          fmt::format("holds nonzero attention biases ('{}'{}), but config.json 'attention_bias' is "
                                      "false, so transformers builds the model without them: set it true to use "
                                      "them, or drop the tensors",
                                      nonzero_biases[0],
                                      nonzero_biases.size() > 1 ? fmt::format(" and {} more", nonzero_biases.size() - 1) : ""));
  }
}

// Copies each parameter from its tensor (zeros where attention_bias: false leaves it none).
void load_weights(GPTImpl& model, const interop::HfArchitecture& arch, const HfFiles& hf, const fs::path& dir) {
  const auto placements = place(model, arch, hf, dir);  // every shape checked before a byte is read
  TensorMap left = read_tensors(hf);
  torch::NoGradGuard no_grad;
  auto params = model.named_parameters();
  std::set<std::string> placed;
  at::Tensor embedding;  // kept for the tied-head check; every other tensor is freed once copied
  std::string embedding_name;
  for (const auto& p : placements) {
    auto it = left.find(p.hf_name);
    params[p.param].copy_(interop::from_hf(it->second, p.layout, arch.model.n_head, arch.model.padded_vocab()));
    if (p.param == "wte.weight") embedding = it->second, embedding_name = it->first;
    left.erase(it);
    placed.insert(p.param);
  }
  for (auto& item : params)
    if (!placed.count(item.key())) item.value().zero_();  // an absent attention bias
  check_leftovers(arch, left, embedding, embedding_name, hf);
}

}  // namespace

HfModel read_hf_model(const fs::path& dir) {
  const fs::path config_file = dir / "config.json";
  HfModel out;
  out.hf_config = interop::read_json_file(config_file);
  const auto arch = interop::architecture_from_hf(out.hf_config, config_file);
  const HfFiles hf = read_headers(dir);
  check_model_size(arch.model, hf, config_file);
  out.model_type = out.hf_config["model_type"].get<std::string>();
  out.config = arch.model;
  out.model = GPT(arch.model);
  load_weights(*out.model, arch, hf, dir);
  out.model->eval();
  return out;
}

}  // namespace attnlab
