// Residual-stream channels of one token's hidden state (SPEC section 5): rms, the top-k channels by
// |x_c|, and the channel lists of `attnlab ablate` / `attnlab retention` ("3,17" | "top:k" |
// "random:k"). The layer convention everywhere: residual stream after block l, before the final
// LayerNorm; l = 0 is the embedding output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace attnlab {

/// rms(x) = sqrt(mean_c x_c^2) of a state x [d_model] (any floating dtype), accumulated in float64.
double rms(const at::Tensor& x);

/// The k channels of x [d_model] with the largest |x_c|, largest first; ties go to the lower channel
/// index, so the order is deterministic. Throws std::invalid_argument for k < 0 or k > d_model.
std::vector<int64_t> top_channels(const at::Tensor& x, int64_t k);

/// A parsed channel list: explicit channels, the top k by |x_c|, or k random channels.
struct ChannelSpec {
  enum class Kind { list, top, random } kind = Kind::list;
  std::vector<int64_t> channels;  ///< Kind::list, in the order given
  int64_t k = 0;                  ///< Kind::top / Kind::random
  std::string text;               ///< as written, for provenance
};

/// Parses "c1,c2,..." | "top:k" | "random:k" against d_model. Throws std::invalid_argument naming the
/// culprit for an empty list, a channel outside [0, d_model), a repeated channel, k < 1 or k > d_model
/// (random: k > d_model - 1, since the dominant channel is excluded).
ChannelSpec parse_channel_spec(const std::string& text, int64_t d_model);

/// The channels `spec` names for a state whose |x_c| ranking is given by `magnitude` [d_model]
/// (e.g. mean |x_c| of the sink token over a batch). random:k draws k distinct channels, uniformly
/// from every channel but the dominant one (argmax), with std::mt19937_64(seed): ablating the
/// dominant channel is what top:1 is for, and random:k is the "small channel" control.
std::vector<int64_t> resolve_channels(const ChannelSpec& spec, const at::Tensor& magnitude, uint64_t seed);

}  // namespace attnlab
