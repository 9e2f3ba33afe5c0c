#include "interop/hf_tensor_names.h"

#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include <ATen/ATen.h>

namespace attnlab::interop {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "h.<layer>.<module>.<leaf>" of a block parameter, e.g. {"0", "attn.c_attn", "weight"}.
struct BlockParameter {
  std::string layer, module, leaf;
};

std::optional<BlockParameter> split_block(const std::string& name) {
  if (!starts_with(name, "h.")) return std::nullopt;
  const size_t layer_end = name.find('.', 2), leaf = name.rfind('.');
  if (layer_end == std::string::npos || leaf <= layer_end) return std::nullopt;
  return BlockParameter{name.substr(2, layer_end - 2), name.substr(layer_end + 1, leaf - layer_end - 1),
                        name.substr(leaf + 1)};
}

[[noreturn]] void no_tensor(const char* kind, const std::string& name) {
  throw std::invalid_argument(std::string("a ") + kind + " directory has no tensor for attnlab parameter '" + name + "'");
}

// GPT-2 keeps attnlab's (nanoGPT's) names under "transformer."; its Conv1D matrices are [in, out].
HfTensor gpt2_tensor(const std::string& name) {
  if (name == "lm_head.weight") return {name, Layout::vocab_rows};
  if (name == "wte.weight") return {"transformer.wte.weight", Layout::vocab_rows};
  if (name == "wpe.weight" || starts_with(name, "ln_f.")) return {"transformer." + name, Layout::same};
  static const std::set<std::string> modules = {"ln_1", "ln_2", "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
  const auto p = split_block(name);
  if (!p || !modules.count(p->module)) no_tensor("GPT-2", name);
  const bool conv1d = p->leaf == "weight" && !starts_with(p->module, "ln_");
  return {"transformer." + name, conv1d ? Layout::transposed : Layout::same};
}

HfTensor neox_tensor(const std::string& name) {
  if (name == "wte.weight") return {"gpt_neox.embed_in.weight", Layout::vocab_rows};
  if (name == "lm_head.weight") return {"embed_out.weight", Layout::vocab_rows};
  if (starts_with(name, "ln_f.")) return {"gpt_neox.final_layer_norm." + name.substr(5), Layout::same};
  static const std::map<std::string, std::string> modules = {
      {"ln_1", "input_layernorm"},        {"ln_2", "post_attention_layernorm"},
      {"attn.c_attn", "attention.query_key_value"}, {"attn.c_proj", "attention.dense"},
      {"mlp.c_fc", "mlp.dense_h_to_4h"},  {"mlp.c_proj", "mlp.dense_4h_to_h"}};
  const auto p = split_block(name);
  const auto it = p ? modules.find(p->module) : modules.end();
  if (it == modules.end()) no_tensor("GPT-NeoX", name);
  return {"gpt_neox.layers." + p->layer + "." + it->second + "." + p->leaf,
          p->module == "attn.c_attn" ? Layout::neox_qkv : Layout::same};
}

// attnlab's own export keeps every name under "transformer." (the untied head under its own name).
HfTensor attnlab_tensor(const std::string& name) {
  if (name == "lm_head.weight") return {name, Layout::vocab_rows};
  return {"transformer." + name, name == "wte.weight" ? Layout::vocab_rows : Layout::same};
}

}  // namespace

HfTensor hf_tensor(HfExportKind kind, const std::string& name) {
  switch (kind) {
    case HfExportKind::gpt2: return gpt2_tensor(name);
    case HfExportKind::gpt_neox: return neox_tensor(name);
    case HfExportKind::attnlab: return attnlab_tensor(name);
  }
  throw std::logic_error("hf_tensor: unknown kind");
}

std::vector<std::string> hf_aliases(HfExportKind kind, const std::string& hf_name) {
  if (kind == HfExportKind::gpt2 && starts_with(hf_name, "transformer.")) return {hf_name.substr(12)};
  if (kind == HfExportKind::gpt_neox && hf_name == "embed_out.weight") return {"lm_head.weight"};
  return {};
}

bool is_hf_buffer(const std::string& hf_name) {
  for (const char* b : {".attn.bias", ".attn.masked_bias", ".attention.bias", ".attention.masked_bias",
                        ".rotary_emb.inv_freq"})
    if (ends_with(hf_name, b)) return true;
  return false;
}

std::vector<int64_t> hf_shape(Layout layout, at::IntArrayRef shape, int64_t vocab_size) {
  std::vector<int64_t> out(shape.begin(), shape.end());
  if (layout == Layout::transposed) std::swap(out[0], out[1]);
  if (layout == Layout::vocab_rows) out[0] = vocab_size;
  return out;
}

at::Tensor from_hf(const at::Tensor& t, Layout layout, int64_t n_head, int64_t padded_vocab) {
  const auto x = t.to(at::kFloat);
  switch (layout) {
    case Layout::same: return x.contiguous();
    case Layout::transposed: return x.t().contiguous();
    case Layout::neox_qkv: {
      // rows h * 3 * hd + part * hd + i  ->  part * H * hd + h * hd + i
      const int64_t rows = x.size(0), head_dim = rows / (3 * n_head);
      auto grouped = x.reshape({n_head, 3, head_dim, -1}).transpose(0, 1);
      return grouped.reshape(x.sizes()).contiguous();
    }
    case Layout::vocab_rows: {
      auto padded = at::zeros({padded_vocab, x.size(1)}, x.options());
      padded.narrow(0, 0, x.size(0)).copy_(x);
      return padded;
    }
  }
  throw std::logic_error("from_hf: unknown layout");
}

at::Tensor to_hf(const at::Tensor& t, Layout layout, int64_t n_head, int64_t vocab_size) {
  const auto x = t.detach().to(at::kCPU).to(at::kFloat);
  switch (layout) {
    case Layout::same: return x.contiguous();
    case Layout::transposed: return x.t().contiguous();
    case Layout::neox_qkv: {
      const int64_t rows = x.size(0), head_dim = rows / (3 * n_head);
      auto per_head = x.reshape({3, n_head, head_dim, -1}).transpose(0, 1);
      return per_head.reshape(x.sizes()).contiguous();
    }
    case Layout::vocab_rows: return x.narrow(0, 0, vocab_size).contiguous();
  }
  throw std::logic_error("to_hf: unknown layout");
}

}  // namespace attnlab::interop
