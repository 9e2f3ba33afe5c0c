#include "attnlab/model_config.h"

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

}  // namespace

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
