// Validation loss on the fixed held-out tokens (SPEC section 3: every arm is judged on one set).
#pragma once

#include <cstdint>

#include "attnlab/batch_sampler.h"
#include "attnlab/model.h"

namespace attnlab {

/// Mean next-token cross-entropy in nats/token over every target of `val` (exactly the token-weighted
/// mean, batches of `batch_size` sequences), with gradients off and `autocast_bf16` on CUDA.
/// The model is left in the training mode it had.
double evaluate(GPTImpl& model, const ValidationSet& val, int64_t batch_size, const c10::Device& device,
                bool autocast_bf16);

}  // namespace attnlab
