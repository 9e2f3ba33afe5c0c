// The trainer's evaluator: when the validation loss is measured (eval.every and the last step) and
// its value over every rank (SPEC section 3: every arm is judged on one fixed set).
#pragma once

#include <cstdint>
#include <memory>

#include <c10/core/Device.h>

#include "attnlab/batch_sampler.h"
#include "attnlab/distributed.h"
#include "attnlab/model.h"
#include "attnlab/run_config.h"

namespace attnlab {

class Evaluator {
 public:
  /// Evaluates on `val` (the run's fixed validation set) in batches of train.batch_size sequences,
  /// on `device`, in bf16 autocast when `autocast` (CUDA only).
  Evaluator(const RunConfig& cfg, std::shared_ptr<const ValidationSet> val, c10::Device device, bool autocast);

  /// Whether the state after `step` (1-based) is evaluated: every eval.every steps and the `last`
  /// step of the run.
  bool should_evaluate(int64_t step, bool last) const;

  /// The validation loss of `model` now, nats/token: each rank evaluates every world_size-th batch
  /// and the token-weighted sums are added over the ranks (evaluate_sum), so every rank gets the
  /// single-process value up to float64 round-off. Every rank must call it (a collective). The
  /// value may be non-finite (a diverged model: the caller stops the run); it becomes last_loss().
  double evaluate(GPTImpl& model, dist::DataParallel& dp);

  /// The value of the last evaluate() of this session; NaN before the first.
  double last_loss() const { return last_loss_; }
  const ValidationSet& validation() const { return *val_; }
  /// Wall seconds spent in evaluate() (final.json's time_s.eval).
  double seconds() const { return seconds_; }

 private:
  int64_t every_;
  int64_t batch_size_;
  std::shared_ptr<const ValidationSet> val_;
  c10::Device device_;
  bool autocast_;
  double last_loss_;
  double seconds_ = 0.0;
};

}  // namespace attnlab
