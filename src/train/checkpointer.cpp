// The checkpointer: the cadence and the keep policy of checkpoint.* (checkpointer.h).
#include "attnlab/checkpointer.h"

#include <chrono>

#include "attnlab/run_dir.h"

namespace attnlab {

std::set<int64_t> log_spaced_steps(const CheckpointConfig& c) {
  std::set<int64_t> steps;
  if (c.log_spaced)
    for (int64_t s = 1; s <= c.log_spaced_until; s *= 2) steps.insert(s);
  return steps;
}

RetentionPolicy retention_policy(const CheckpointConfig& c) {
  RetentionPolicy policy;
  policy.keep_last = c.keep_last;
  policy.keep_steps = log_spaced_steps(c);
  policy.keep_every = c.keep_every;
  return policy;
}

Checkpointer::Checkpointer(const CheckpointConfig& config) : every_(config.every), policy_(retention_policy(config)) {}

bool Checkpointer::should_save(int64_t step, bool last, bool stop) const {
  return last || stop || step % every_ == 0 || policy_.keep_steps.count(step) > 0;
}

void Checkpointer::save(const RunWriter& writer, const GPTImpl& model, const torch::optim::Optimizer& opt,
                        const TrainState& state) {
  const auto t0 = std::chrono::steady_clock::now();
  writer.save_checkpoint(model, opt, state, policy_);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace attnlab
