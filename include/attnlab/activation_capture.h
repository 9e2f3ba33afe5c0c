// Captures the residual stream of one forward pass and reduces it to activation_stats.h's statistics,
// per layer l = 0..n_layer ("residual stream after block l, before the final LayerNorm; l = 0 is the
// embedding output"; SPEC section 5).
//
// Two states per layer:
//  - the sink state: position 0 of sequence 0 of the probe batch. For the sink_token arm that is the
//    learned token the model prepends (identical in every sequence); for the other arms it is the
//    first text token of the first sequence (the position that becomes the attention sink).
//  - the peak state: the (sequence, position) holding the largest |x_c| over the whole batch at that
//    layer (first in (sequence, position) order on ties), named in the result. Positions count the
//    prepended sink token for the sink_token arm, as ForwardHooks does.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json_fwd.hpp>

#include "attnlab/activation_stats.h"

namespace attnlab {

class GPTImpl;

/// How every output names residual layers (activations, retention, ablation).
inline constexpr const char* kLayerConvention =
    "residual stream after block l, before the final LayerNorm; l = 0 is the embedding output";

struct LayerActivations {
  int64_t layer = 0;               ///< 0 = embedding output, n_layer = input of the final LayerNorm
  ActivationStats sink;            ///< at (sequence 0, position 0)
  ActivationStats peak;            ///< at (peak_sequence, peak_position)
  int64_t peak_sequence = 0;
  int64_t peak_position = 0;
  std::vector<double> sink_abs;    ///< |x_c| at the sink state, d_model values (channel rankings)
};

struct ActivationCapture {
  std::vector<LayerActivations> layers;  ///< n_layer + 1 entries, by layer
  /// |x| [T, d_model] float64 of the peak's sequence at `tokens_layer` (undefined when not asked)
  at::Tensor tokens_abs;
  int64_t tokens_layer = -1;
  int64_t tokens_sequence = -1;
};

struct CaptureOptions {
  int64_t top_k = 8;               ///< channels listed per state
  MassiveCriterion massive;
  int64_t tokens_layer = -1;       ///< also keep |x| [T, d_model] of this layer; -1 = none
};

/// One forward pass of `model` on idx [B, T] int64 (no gradient, model left in its mode), reduced
/// as above. The model's parameters, gradients and the random generators are untouched, so calling
/// it during training changes nothing the run computes (tested). Throws std::invalid_argument for
/// an empty batch, or a tokens_layer outside [-1, n_layer].
ActivationCapture capture_activations(GPTImpl& model, const at::Tensor& idx, const CaptureOptions& options = {});

/// [{"layer", "sink": stats, "peak": stats + "sequence", "position"}, ...] (sink_abs and tokens_abs
/// are left out: metrics.jsonl stays small).
nlohmann::json layers_json(const ActivationCapture& capture);

}  // namespace attnlab
