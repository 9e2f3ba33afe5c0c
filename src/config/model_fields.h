// The keys of a model config: the one list behind the `model:` section of a run's YAML, the model a
// checkpoint stores (state.json, model.safetensors' metadata) and the model keys of attnlab's own
// config.json (docs/config.md, docs/checkpoints.md, docs/interop.md). Internal to src/config.
#pragma once

#include <optional>

#include "attnlab/model_config.h"

namespace attnlab::detail {

/// Whether a file that stores a model (a checkpoint's model, attnlab's config.json) must name a key.
/// required: every such file has held it since the first format, so one without it is damaged.
/// defaulted: added later; a file without it predates the key and had it off, which the default says
/// (config_hash also leaves such a key out at its default, so older runs keep their hash). A YAML
/// config may leave any key to its tier or to the default.
enum class Need { defaulted, required };

/// Whether a member is an optional key (std::optional): written only when set.
template <class T>
inline constexpr bool is_optional_v = false;
template <class T>
inline constexpr bool is_optional_v<std::optional<T>> = true;

/// Calls v.field(key, member, need) for every key, in the order files list them. An optional member is
/// written only when set (a model without a window keeps the bytes it had before windows existed).
template <class V>
void visit_model_fields(ModelConfig& m, V& v) {
  v.field("arm", m.arm, Need::required);
  v.field("n_layer", m.n_layer, Need::required);
  v.field("n_head", m.n_head, Need::required);
  v.field("d_model", m.d_model, Need::required);
  v.field("block_size", m.block_size, Need::required);
  v.field("vocab_size", m.vocab_size, Need::required);
  v.field("routing_gate", m.routing_gate, Need::required);
  v.field("rotary_fraction", m.rotary_fraction, Need::defaulted);
  v.field("rotary_base", m.rotary_base, Need::defaulted);
  v.field("parallel_residual", m.parallel_residual, Need::defaulted);
  v.field("untied_head", m.untied_head, Need::defaulted);
  v.field("gelu", m.gelu, Need::defaulted);
  v.field("window", m.window, Need::defaulted);
  v.field("window_pattern", m.window_pattern, Need::defaulted);
  v.field("window_keep_first", m.window_keep_first, Need::defaulted);
}

}  // namespace attnlab::detail
