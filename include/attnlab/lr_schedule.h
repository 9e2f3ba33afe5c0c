// Learning-rate schedule of SPEC section 2: linear warm-up, then cosine decay to min_lr_ratio * lr.
#pragma once

#include <cstdint>

#include "attnlab/run_config.h"

namespace attnlab {

/// Learning rate of optimizer step `step` (0-based) of `total_steps`:
///   step < warmup:  lr * (step + 1) / warmup
///   otherwise:      min + 0.5 (1 + cos(pi * progress)) (lr - min),  progress = (step - warmup) /
///                   max(1, total_steps - warmup) clamped to [0, 1],  min = lr * min_lr_ratio.
double learning_rate(const OptimConfig& optim, int64_t step, int64_t total_steps);

}  // namespace attnlab
