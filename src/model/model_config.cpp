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

}  // namespace

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
}

ParamCounts count_params(const ModelConfig& cfg) {
  const int64_t d = cfg.d_model;
  // Per block: ln_1, ln_2 (2d each), c_attn (3d^2 + 3d), attn c_proj (d^2 + d),
  // mlp c_fc (4d^2 + 4d), mlp c_proj (4d^2 + d)  =  12 d^2 + 13 d.
  const int64_t per_block = 12 * d * d + 13 * d;
  ParamCounts counts;
  counts.arm_extra = arm_extra_params(cfg.arm_spec(), cfg.n_layer, cfg.n_head, cfg.head_dim(), d);
  counts.non_embedding = cfg.n_layer * per_block + 2 * d /* ln_f */ + counts.arm_extra;
  counts.total = counts.non_embedding + cfg.padded_vocab() * d + cfg.block_size * d;
  return counts;
}

}  // namespace attnlab
