#include "attnlab/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace attnlab {

double learning_rate(const OptimConfig& optim, int64_t step, int64_t total_steps) {
  if (step < optim.warmup_steps) return optim.lr * double(step + 1) / double(optim.warmup_steps);
  const double min_lr = optim.lr * optim.min_lr_ratio;
  const double span = double(std::max<int64_t>(1, total_steps - optim.warmup_steps));
  const double progress = std::clamp(double(step - optim.warmup_steps) / span, 0.0, 1.0);
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (optim.lr - min_lr);
}

}  // namespace attnlab
