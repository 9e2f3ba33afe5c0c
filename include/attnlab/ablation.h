// Channel ablation at the sink token (SPEC section 5; paper 003): edit some channels of the residual
// state x after block l (l = 0 the embedding output, l = n_layer the input of the final LayerNorm) at
// one position, run one forward and one backward pass without an update, and compare with the
// unablated pass: rms(x), ||grad_x||, their product, the attention the position receives, the loss.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "attnlab/batch_sampler.h"
#include "attnlab/channel_select.h"
#include "attnlab/model.h"
#include "attnlab/rms_ceiling.h"
#include "attnlab/trained_run.h"

namespace attnlab {

/// How the chosen channels are edited.
struct AblationMode {
  enum class Kind { zero, mean, scale } kind = Kind::zero;
  /// scale: x_c <- alpha x_c. mean: x_c <- the mean of channel c over the other positions of the
  /// same sequence (positions != the edited one), so the token looks "typical" in that channel.
  double alpha = 1.0;
  std::string text;  ///< as written
};

/// Parses "zero" | "mean" | "scale:a" (a finite number). Throws std::invalid_argument naming the text.
AblationMode parse_ablation_mode(const std::string& text);

/// A copy of x [B, T, d_model] with x[:, position, channels] edited by `mode`; every other entry is
/// bit-identical to x. Throws std::invalid_argument for a position outside [0, T), a channel outside
/// [0, d_model), or mean mode with T = 1 (no other position to take the mean over).
at::Tensor ablate_state(const at::Tensor& x, int64_t position, const std::vector<int64_t>& channels,
                        const AblationMode& mode);

struct AblationOptions {
  int64_t layer = 0;      ///< residual layer in [0, n_layer]
  int64_t position = 0;   ///< the sink token (position 0; the learned token for sink_token)
  /// Resolved against the reference pass's mean |x_c| over the batch at (layer, position).
  ChannelSpec channels;
  uint64_t seed = 0;      ///< for random:k
  AblationMode mode;
};

/// What one pass measured. Per-sequence quantities are means over the batch's B sequences.
struct AblationPass {
  double loss = 0.0;       ///< mean next-token cross-entropy, nats/token
  double rms = 0.0;        ///< mean_b rms(x_b), x_b [d_model] the state at (layer, position) the rest
                           ///< of the network sees (the edited one in the ablated pass)
  double grad_norm = 0.0;  ///< mean_b ||dL_b / dx_b||, L_b the mean loss of sequence b (nats/token)
  double product = 0.0;    ///< mean_b rms(x_b) ||dL_b / dx_b||
  /// Per block l' in [0, n_layer): mean over sequences, heads and queries i > position of a_{i,position}
  /// (SPEC 4's position-0 mass when position = 0). Blocks before `layer` see no edit.
  std::vector<double> sink_attention;
  at::Tensor state;  ///< [B, d_model] float64 CPU, x_b
  at::Tensor grad;   ///< [B, d_model] float64 CPU, dL_b / dx_b
};

struct AblationResult {
  std::vector<int64_t> channels;  ///< the channels edited, as resolved
  AblationPass reference;         ///< unablated
  AblationPass ablated;
};

/// One forward and backward pass of `batch` (x, y [B, T] int64) with and without the edit; no
/// parameter gradient is kept and nothing is updated. The model must be able to return attention
/// probabilities (backend auto or reference). Throws std::invalid_argument for a layer outside
/// [0, n_layer], a bad position, channel or mode (see ablate_state).
AblationResult ablate(GPTImpl& model, const Batch& batch, const AblationOptions& options);

/// One pass with `edit` applied to the residual state [B, T, d_model] after block `layer` (identity
/// for the reference pass); the building block of ablate(), exposed for tests.
AblationPass measure_pass(GPTImpl& model, const Batch& batch, int64_t layer, int64_t position,
                          const std::function<at::Tensor(const at::Tensor&)>& edit);

/// Everything `attnlab ablate` ran, for its files.
struct AblationReportInputs {
  const Provenance& provenance;
  int64_t batch = 0;                      ///< index of the validation batch ablated
  const AblationOptions& options;         ///< as run, options.channels.text as written
  const AblationResult& result;
  std::optional<CeilingResult> ceiling;   ///< none when skipped or at the last layer
  CeilingOptions ceiling_options;
};

/// ablate.json (provenance, options, both passes, the change, the ceiling or null), ablate.md,
/// ablate_channels.csv and, with a ceiling, ceiling.csv, by name.
std::map<std::string, std::string> ablation_files(const AblationReportInputs& inputs);

}  // namespace attnlab
