#include "interop/hf_config.h"

#include <cmath>
#include <string>

#include "attnlab/arm_params.h"
#include "attnlab/checkpoint_error.h"
#include "attnlab/model_config_json.h"
#include "attnlab/shards.h"
#include "common/json_read.h"

namespace attnlab::interop {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr double kLayerNormEps = 1e-5;  // LibTorch's LayerNorm default, which attnlab's model uses

// Typed access to config.json, naming the file and the key in every error.
struct ConfigReader {
  const json& j;
  const fs::path& file;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw CheckpointError(file, "config.json '" + key + "' " + what);
  }
  bool has(const char* key) const { return j.contains(key) && !j[key].is_null(); }
  int64_t integer(const char* key) const {
    if (!has(key)) fail(key, "is missing");
    if (!j[key].is_number_integer()) fail(key, "is not an integer: " + j[key].dump());
    return j[key].get<int64_t>();
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_number()) fail(key, "is not a number: " + j[key].dump());
    return j[key].get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_boolean()) fail(key, "is not true or false: " + j[key].dump());
    return j[key].get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_string()) fail(key, "is not a string: " + j[key].dump());
    return j[key].get<std::string>();
  }
  void require(bool ok, const char* key, const std::string& what) const {
    if (!ok) fail(key, what);
  }
};

// transformers' activation names that are exactly one of attnlab's two GELUs.
GeluKind gelu_of(const ConfigReader& c, const char* key, const std::string& fallback) {
  const std::string act = c.string(key, fallback);
  if (act == "gelu") return GeluKind::erf;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh") return GeluKind::tanh;
  c.fail(key, "= '" + act + "': attnlab computes gelu (erf), gelu_new or gelu_pytorch_tanh (tanh) only");
}

void check_layer_norm_eps(const ConfigReader& c, const char* key) {
  const double eps = c.number(key, kLayerNormEps);
  c.require(std::abs(eps - kLayerNormEps) <= 1e-12, key, "= " + std::to_string(eps) + ": attnlab's LayerNorm uses 1e-5");
}

// The keys a model type names the dimensions with (the table of docs/interop.md).
struct DimensionKeys {
  const char *d_model, *n_layer, *n_head, *block_size;
  int64_t block_size_default;
};

HfArchitecture with_dimensions(const ConfigReader& c, HfExportKind kind, const DimensionKeys& keys) {
  HfArchitecture a;
  a.kind = kind;
  a.model.d_model = c.integer(keys.d_model);
  a.model.n_layer = c.integer(keys.n_layer);
  a.model.n_head = c.integer(keys.n_head);
  a.model.vocab_size = c.integer("vocab_size");
  a.model.block_size = c.integer(keys.block_size, keys.block_size_default);
  return a;
}

// width == 4 * d_model, without forming 4 * d_model (a config's d_model may be near 2^63).
bool four_times(int64_t width, int64_t d_model) { return width % 4 == 0 && width / 4 == d_model; }

HfArchitecture from_gpt2(const ConfigReader& c) {
  HfArchitecture a = with_dimensions(c, HfExportKind::gpt2, {"n_embd", "n_layer", "n_head", "n_positions", 1024});
  ModelConfig& m = a.model;
  c.require(!c.has("n_inner") || four_times(c.integer("n_inner"), m.d_model), "n_inner",
            "must be 4 * n_embd (attnlab's MLP width)");
  m.gelu = gelu_of(c, "activation_function", "gelu_new");
  check_layer_norm_eps(c, "layer_norm_epsilon");
  c.require(c.boolean("scale_attn_weights", true), "scale_attn_weights", "must be true (scores / sqrt(head_dim))");
  c.require(!c.boolean("scale_attn_by_inverse_layer_idx", false), "scale_attn_by_inverse_layer_idx", "must be false");
  c.require(!c.boolean("add_cross_attention", false), "add_cross_attention", "must be false (a decoder-only model)");
  m.untied_head = !c.boolean("tie_word_embeddings", true);
  return a;
}

HfArchitecture from_neox(const ConfigReader& c) {
  HfArchitecture a = with_dimensions(c, HfExportKind::gpt_neox,
                                     {"hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings", 2048});
  ModelConfig& m = a.model;
  c.require(four_times(c.integer("intermediate_size"), m.d_model), "intermediate_size",
            "must be 4 * hidden_size (attnlab's MLP width)");
  m.gelu = gelu_of(c, "hidden_act", "gelu");
  check_layer_norm_eps(c, "layer_norm_eps");
  m.parallel_residual = c.boolean("use_parallel_residual", true);
  m.untied_head = !c.boolean("tie_word_embeddings", false);
  a.attention_bias = c.boolean("attention_bias", true);
  // Rotary: transformers 5 writes rope_parameters, older versions (and Pythia's hub files) rotary_pct
  // and rotary_emb_base; rope_parameters wins, as in transformers.
  m.rotary_fraction = c.number("rotary_pct", 0.25);
  m.rotary_base = c.number("rotary_emb_base", 10000.0);
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!c.has(key)) continue;
    const ConfigReader rope{c.j[key], c.file};
    c.require(c.j[key].is_object(), key, "is not an object");
    c.require(rope.string("rope_type", rope.string("type", "default")) == "default", key,
              "asks for rope scaling " + c.j[key].dump() + "; attnlab computes plain rotary embeddings only");
    m.rotary_fraction = rope.number("partial_rotary_factor", m.rotary_fraction);
    m.rotary_base = rope.number("rope_theta", m.rotary_base);
  }
  // head_dim() divides by n_head: a count validate() refuses (0, or one d_model is no multiple of) is left to it.
  if (m.n_head > 0 && m.d_model % m.n_head == 0)
    c.require(m.rotary_dims() > 0, "rotary_pct", "rotates no channel; attnlab needs positions (rotary or learned)");
  return a;
}

// attnlab's own export: the model config verbatim (model_config_json.h), the arm's features checked
// against the arm.
HfArchitecture from_attnlab(const ConfigReader& c) {
  HfArchitecture a;
  a.kind = HfExportKind::attnlab;
  try {
    a.model = model_config_from_json(c.j);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(c.file, std::string("config.json ") + e.what());
  }
  try {
    const ArmSpec arm = a.model.arm_spec();
    const json features = hf_arm_features(arm);
    for (const auto& [key, want] : features.items()) {
      // Exports from before the output gate have no out_gate key: theirs is "none".
      const json got = c.j.value(key, key == "out_gate" ? json("none") : json());
      c.require(got == want, key.c_str(), "= " + got.dump() + " contradicts arm '" + arm.name + "' (" + want.dump() + ")");
    }
  } catch (const std::invalid_argument& e) {
    c.fail("arm", e.what());
  }
  check_layer_norm_eps(c, "layer_norm_eps");
  return a;
}

}  // namespace

json read_json_file(const fs::path& file) {
  try {
    return detail::read_json_file(file);  // a FIFO, deep nesting or 1e400 named, never a crash or a hang
  } catch (const FileError& e) {
    throw CheckpointError(file, e.problem());
  }
}

HfArchitecture architecture_from_hf(const json& config, const fs::path& file) {
  if (!config.is_object()) throw CheckpointError(file, "is not a JSON object");
  const ConfigReader c{config, file};
  const std::string type = c.string("model_type", "");
  HfArchitecture a;
  if (type == "gpt2") a = from_gpt2(c);
  else if (type == "gpt_neox") a = from_neox(c);
  else if (type == "attnlab") a = from_attnlab(c);
  else c.fail("model_type", "= '" + type + "': attnlab imports gpt2, gpt_neox and attnlab models");
  try {
    a.model.validate();
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(file, std::string("describes a model attnlab cannot build: ") + e.what());
  }
  normalize_window(a.model);
  return a;
}

json hf_config_json(HfExportKind kind, const ModelConfig& m, int64_t eot) {
  const std::string hf_gelu = m.gelu == GeluKind::erf ? "gelu" : "gelu_new";
  json j;
  switch (kind) {
    case HfExportKind::gpt2:
      j = {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", m.vocab_size},
           {"n_positions", m.block_size}, {"n_embd", m.d_model}, {"n_layer", m.n_layer}, {"n_head", m.n_head},
           {"n_inner", nullptr}, {"activation_function", hf_gelu}, {"layer_norm_epsilon", kLayerNormEps},
           {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"scale_attn_weights", true},
           {"scale_attn_by_inverse_layer_idx", false}, {"reorder_and_upcast_attn", false},
           {"tie_word_embeddings", !m.untied_head}};
      break;
    case HfExportKind::gpt_neox:
      j = {{"architectures", {"GPTNeoXForCausalLM"}}, {"model_type", "gpt_neox"}, {"vocab_size", m.vocab_size},
           {"hidden_size", m.d_model}, {"num_hidden_layers", m.n_layer}, {"num_attention_heads", m.n_head},
           {"intermediate_size", 4 * m.d_model}, {"hidden_act", hf_gelu}, {"max_position_embeddings", m.block_size},
           {"layer_norm_eps", kLayerNormEps}, {"use_parallel_residual", m.parallel_residual},
           {"rotary_pct", m.rotary_fraction}, {"rotary_emb_base", m.rotary_base}, {"attention_bias", true},
           {"hidden_dropout", 0.0}, {"attention_dropout", 0.0}, {"tie_word_embeddings", !m.untied_head}};
      break;
    case HfExportKind::attnlab: {
      ModelConfig model = m;
      normalize_window(model);  // a windowed model's pattern expanded, one letter per block
      j = model_config_to_json(model);
      j.update({{"architectures", {"AttnlabForCausalLM"}}, {"model_type", "attnlab"},
                {"auto_map", {{"AutoConfig", "configuration_attnlab.AttnlabConfig"},
                              {"AutoModelForCausalLM", "modeling_attnlab.AttnlabForCausalLM"}}},
                {"norm_gate_beta", kNormGateBeta}, {"layer_norm_eps", kLayerNormEps}, {"tie_word_embeddings", false}});
      j.update(hf_arm_features(m.arm_spec()));
      break;
    }
  }
  // Always explicit: transformers' defaults (50256 for GPT-2, 0 and 2 for GPT-NeoX) would otherwise name
  // tokens of another vocabulary. GPT-2 BPE's <|endoftext|> begins and ends documents.
  if (eot < 0 && m.vocab_size == kGpt2VocabSize) eot = kGpt2VocabSize - 1;
  j["bos_token_id"] = eot >= 0 ? json(eot) : json();
  j["eos_token_id"] = eot >= 0 ? json(eot) : json();
  j["dtype"] = "float32";
  return j;
}

}  // namespace attnlab::interop

namespace attnlab {

nlohmann::json hf_arm_features(const ArmSpec& arm) {
  return {{"sink", to_string(arm.sink)}, {"gate", to_string(arm.gate)}, {"gate_slot", to_string(arm.slot)},
          {"sink_token", arm.sink_token}, {"out_gate", to_string(arm.out_gate)}};
}

}  // namespace attnlab
