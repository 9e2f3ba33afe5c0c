// A Hugging Face model directory -> attnlab's model (read_hf_model).
#include <map>
#include <set>

#include <torch/torch.h>

#include "attnlab/hf_interop.h"
#include "checkpoint/file_ops.h"
#include "interop/hf_config.h"
#include "interop/hf_tensor_names.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Every tensor of the directory's safetensors file(s), by Hugging Face name, with the file holding it.
struct HfTensors {
  TensorMap tensors;
  std::map<std::string, fs::path> file_of;
};

void add_file(HfTensors& out, const fs::path& file) {
  for (auto& [name, tensor] : read_safetensors(file).tensors) {
    if (out.tensors.count(name)) throw CheckpointError(file, "repeats tensor '" + name + "' of " + out.file_of[name].string());
    out.file_of[name] = file;
    out.tensors.emplace(name, std::move(tensor));
  }
}

HfTensors read_hf_tensors(const fs::path& dir) {
  HfTensors out;
  if (detail::is_file(dir / "model.safetensors")) {
    add_file(out, dir / "model.safetensors");
    return out;
  }
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
    for (const auto& shard : shards) add_file(out, dir / shard);
    return out;
  }
  if (detail::is_file(dir / "pytorch_model.bin") || detail::is_file(dir / "pytorch_model.bin.index.json")) {
    throw CheckpointError(dir, "holds its weights only as pytorch_model.bin (a Python pickle); save them as safetensors "
                               "first (docs/interop.md: tools/hf_fetch.py does it)");
  }
  throw CheckpointError(dir, "has no model.safetensors or model.safetensors.index.json");
}

bool is_attention_bias(const std::string& name) {
  const auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".attn.c_attn.bias") || ends(".attn.c_proj.bias");
}

// Copies each parameter of `model` from its Hugging Face tensor; refuses tensors left without a place.
void load_weights(GPTImpl& model, const interop::HfArchitecture& arch, HfTensors hf, const fs::path& dir) {
  torch::NoGradGuard no_grad;
  const ModelConfig& cfg = arch.model;
  for (auto& item : model.named_parameters()) {
    const auto target = interop::hf_tensor(arch.kind, item.key());
    auto it = hf.tensors.find(target.name);
    for (const auto& alias : interop::hf_aliases(arch.kind, target.name))
      if (it == hf.tensors.end()) it = hf.tensors.find(alias);
    if (it == hf.tensors.end()) {
      if (!arch.attention_bias && is_attention_bias(item.key())) {  // attention_bias: false
        item.value().zero_();
        continue;
      }
      throw CheckpointError(dir, "has no tensor '" + target.name + "' (attnlab's " + item.key() + ")");
    }
    const fs::path file = hf.file_of.at(it->first);
    const auto want = interop::hf_shape(target.layout, item.value().sizes(), cfg.vocab_size);
    if (!it->second.sizes().equals(want)) {
      throw CheckpointError(file, "tensor '" + it->first + "' has shape " + c10::str(it->second.sizes()) + ", expected " +
                                      c10::str(at::IntArrayRef(want)) + " from config.json");
    }
    if (!it->second.is_floating_point()) throw CheckpointError(file, "tensor '" + it->first + "' is not floating point");
    item.value().copy_(interop::from_hf(it->second, target.layout, cfg.n_head, cfg.padded_vocab()));
    hf.tensors.erase(it);  // frees it, and what remains must be accounted for
  }
  for (const auto& [name, tensor] : hf.tensors) {
    const bool tied_head = !cfg.untied_head && (name == "lm_head.weight" || name == "embed_out.weight");
    if (interop::is_hf_buffer(name) || tied_head) continue;  // transformers ignores these too
    throw CheckpointError(hf.file_of.at(name), "holds tensor '" + name + "', which attnlab's model has no place for");
  }
}

}  // namespace

HfModel read_hf_model(const fs::path& dir) {
  const fs::path config_file = dir / "config.json";
  HfModel out;
  out.hf_config = interop::read_json_file(config_file);
  const auto arch = interop::architecture_from_hf(out.hf_config, config_file);
  out.model_type = out.hf_config["model_type"].get<std::string>();
  out.config = arch.model;
  out.model = GPT(arch.model);
  load_weights(*out.model, arch, read_hf_tensors(dir), dir);
  out.model->eval();
  return out;
}

}  // namespace attnlab
