// The baseline arm through LibTorch's at::scaled_dot_product_attention (backend `sdpa`, docs/kernels.md):
// the speed yardstick the fused kernels are measured against, and nothing more.
#pragma once

#include "attnlab/attention.h"

namespace attnlab {

/// Plain causal softmax attention (SPEC section 1 with no sink, no routing bias, no gate) by
/// at::scaled_dot_product_attention: q [B, H, Tq, d], k and v [B, H, Tk, d], queries at the last
/// Tq positions (an explicit bottom-right causal mask when Tq < Tk). Any device and dtype SDPA takes.
/// Returns o [B, H, Tq, d] only: SDPA's public API gives no log-sum-exp, so `lse` and `probs` stay
/// undefined. Throws std::invalid_argument when the inputs carry a sink logit, a routing bias or a
/// key mask (features SDPA's fast kernels do not have), or on inconsistent shapes.
AttentionResult sdpa_attention(const AttentionInputs& in);

}  // namespace attnlab
