#include "attnlab/model_config.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "attnlab/arm_params.h"

namespace attnlab {
namespace {

void require_positive(int64_t value, const char* key) {
  if (value <= 0) {
    throw std::invalid_argument(std::string("model.") + key + " must be positive, got " +
                                std::to_string(value));
  }
}

void validate_architecture_options(const ModelConfig& cfg) {
  if (!(cfg.rotary_fraction >= 0.0 && cfg.rotary_fraction <= 1.0)) {
    throw std::invalid_argument("model.rotary_fraction must lie in [0, 1] (0 = learned positions), got " +
                                std::to_string(cfg.rotary_fraction));
  }
  const int64_t dims = cfg.rotary_dims();
  if (cfg.rotary_fraction > 0.0 && (dims < 2 || dims % 2 != 0)) {
    throw std::invalid_argument("model.rotary_fraction = " + std::to_string(cfg.rotary_fraction) + " of head_dim " +
                                std::to_string(cfg.head_dim()) + " rotates " + std::to_string(dims) +
                                " channels; rotary needs an even number, at least 2");
  }
  if (!(cfg.rotary_base > 0.0)) {
    throw std::invalid_argument("model.rotary_base must be positive, got " + std::to_string(cfg.rotary_base));
  }
  if (!name_table<GeluKind>().has(cfg.gelu)) {  // only a value cast from an integer
    throw std::invalid_argument("model.gelu: " + std::to_string(static_cast<int>(cfg.gelu)) + " is not one of " +
                                name_table<GeluKind>().valid_names());
  }
}

// A pattern as errors echo it: at most 64 letters, then how many more (a pattern may be any length).
std::string shortened(const std::string& pattern) {
  constexpr size_t kShown = 64;
  if (pattern.size() <= kShown) return pattern;
  return pattern.substr(0, kShown) + "... (" + std::to_string(pattern.size()) + " letters)";
}

// docs/windows.md, "Refused": each message names its key.
void validate_window(const ModelConfig& cfg) {
  if (cfg.window && *cfg.window < 1) {
    throw std::invalid_argument("model.window: must be at least 1 (null: no window), got " + std::to_string(*cfg.window));
  }
  if (cfg.window_pattern) {
    const auto& pattern = *cfg.window_pattern;
    if (pattern.empty()) throw std::invalid_argument("model.window_pattern: empty; give L (local) and G (global) letters");
    const auto bad = pattern.find_first_not_of("LG");
    if (bad != std::string::npos) {
      const auto byte = static_cast<unsigned char>(pattern[bad]);  // a non-ASCII byte is shown, not split
      const std::string shown = byte < 0x80 ? "'" + std::string(1, pattern[bad]) + "'" : fmt::format("byte 0x{:02X}", byte);
      throw std::invalid_argument("model.window_pattern: '" + shortened(pattern) + "' has " + shown + " at index " +
                                  std::to_string(bad) + "; only L (local) and G (global)");
    }
    if (!cfg.window) throw std::invalid_argument("model.window_pattern: needs model.window");
  }
  if (cfg.window_keep_first) {
    if (*cfg.window_keep_first < 0) {
      throw std::invalid_argument("model.window_keep_first: must be >= 0, got " + std::to_string(*cfg.window_keep_first));
    }
    if (*cfg.window_keep_first > 0 && !cfg.window) throw std::invalid_argument("model.window_keep_first: needs model.window");
  }
}

}  // namespace

bool ModelConfig::layer_is_local(int64_t layer) const {
  if (!window) return false;
  if (!window_pattern || window_pattern->empty()) return true;
  return (*window_pattern)[static_cast<size_t>(layer) % window_pattern->size()] == 'L';
}

AttentionWindow ModelConfig::layer_window(int64_t layer) const {
  if (!layer_is_local(layer)) return {};
  return {*window, window_keep_first.value_or(0)};
}

bool ModelConfig::has_local_layer() const {
  for (int64_t l = 0; l < n_layer; ++l)
    if (layer_is_local(l)) return true;
  return false;
}

void normalize_window(ModelConfig& cfg) {
  if (!cfg.window) {
    cfg.window_keep_first.reset();  // 0 without a window (validate refuses more)
    return;
  }
  std::string expanded;
  for (int64_t l = 0; l < cfg.n_layer; ++l) expanded += cfg.layer_is_local(l) ? 'L' : 'G';
  const int64_t keep = cfg.window_keep_first.value_or(0);
  const int64_t positions = cfg.block_size + (cfg.arm_spec().sink_token ? 1 : 0);
  // W + n >= P hides nothing: no window (written without the sum, which may overflow).
  if (expanded.find('L') == std::string::npos || *cfg.window >= positions - keep) {
    cfg.window.reset(), cfg.window_pattern.reset(), cfg.window_keep_first.reset();
    return;
  }
  cfg.window_pattern = expanded;
  cfg.window_keep_first = keep;
}

std::string window_pattern_warning(const ModelConfig& cfg) {
  if (!cfg.window_pattern || static_cast<int64_t>(cfg.window_pattern->size()) <= cfg.n_layer) return "";
  return "model.window_pattern: '" + shortened(*cfg.window_pattern) + "' is longer than model.n_layer = " +
         std::to_string(cfg.n_layer) + "; the layers use '" + shortened(cfg.window_pattern->substr(0, cfg.n_layer)) + "'";
}

template <>
const NameTable<GeluKind>& name_table<GeluKind>() {
  static const NameTable<GeluKind> table("GELU", {{GeluKind::tanh, "tanh"}, {GeluKind::erf, "erf"}});
  return table;
}

std::string to_string(GeluKind gelu) { return name_table<GeluKind>().name(gelu); }

int64_t ModelConfig::rotary_dims() const {
  return static_cast<int64_t>(static_cast<double>(head_dim()) * rotary_fraction);
}

void ModelConfig::validate() const {
  arm_spec();  // throws on an unknown arm name
  require_positive(n_layer, "n_layer");
  require_positive(n_head, "n_head");
  require_positive(d_model, "d_model");
  require_positive(block_size, "block_size");
  require_positive(vocab_size, "vocab_size");
  if (d_model % n_head != 0) {
    throw std::invalid_argument("model.d_model = " + std::to_string(d_model) +
                                " is not divisible by model.n_head = " + std::to_string(n_head));
  }
  validate_architecture_options(*this);
  validate_window(*this);
}

ParamCounts count_params(const ModelConfig& cfg) {
  const int64_t d = cfg.d_model;
  // Per block: ln_1, ln_2 (2d each), c_attn (3d^2 + 3d), attn c_proj (d^2 + d),
  // mlp c_fc (4d^2 + 4d), mlp c_proj (4d^2 + d)  =  12 d^2 + 13 d.
  const int64_t per_block = 12 * d * d + 13 * d;
  ParamCounts counts;
  counts.arm_extra = arm_extra_params(cfg.arm_spec(), cfg.n_layer, cfg.n_head, cfg.head_dim(), d);
  counts.non_embedding = cfg.n_layer * per_block + 2 * d /* ln_f */ + counts.arm_extra;
  const int64_t positions = cfg.rotary_fraction > 0 ? 0 : cfg.block_size * d;  // rotary has no wpe
  const int64_t heads = (cfg.untied_head ? 2 : 1) * cfg.padded_vocab() * d;    // wte (+ lm_head)
  counts.total = counts.non_embedding + heads + positions;
  return counts;
}

}  // namespace attnlab
