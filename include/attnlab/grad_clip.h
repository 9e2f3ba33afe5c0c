// The global gradient norm and clipping of one optimizer step (SPEC section 3: "clipping at 1.0",
// the rule of PyTorch's clip_grad_norm_), made safe for extreme gradients: docs/checkpoints.md,
// "Numerics of a step", says what the trainer does with a non-finite norm.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace attnlab {

/// sqrt(sum over parameters p, elements i of g_pi^2) over the gradients of `parameters` (those
/// without one are skipped), each gradient's norm taken in float64, so any finite float32, bf16 or
/// fp16 gradients give a finite and correct norm, also where their float32 sum of squares would
/// overflow (elements beyond ~1.8e19) or underflow (below ~1e-23). +inf or NaN exactly when some
/// element is +-inf or NaN; 0 when no parameter has a gradient. One device synchronisation.
double global_grad_norm(const std::vector<at::Tensor>& parameters);

/// Scales every gradient of `parameters` in place by max_norm / (norm + 1e-6) when that factor is
/// below 1, `norm` being global_grad_norm(parameters); otherwise, and whenever max_norm <= 0
/// (clipping off), leaves them bit for bit. Returns whether it scaled.
/// Throws std::invalid_argument when `norm` is not finite: no factor repairs such gradients.
bool clip_gradients(const std::vector<at::Tensor>& parameters, double norm, double max_norm);

}  // namespace attnlab
