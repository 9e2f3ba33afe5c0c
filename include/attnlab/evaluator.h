// The trainer's evaluator: when the validation loss is measured (eval.every and the last step) and
// its value over every rank (SPEC section 3: every arm is judged on one fixed set), with the
// downstream accuracies of eval.tasks at the same steps (docs/downstream.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <c10/core/Device.h>

#include "attnlab/batch_sampler.h"
#include "attnlab/distributed.h"
#include "attnlab/evaluate.h"
#include "attnlab/model.h"
#include "attnlab/run_config.h"
#include "attnlab/task_file.h"

namespace attnlab {

class Evaluator {
 public:
  /// Evaluates on `val` (the run's fixed validation set) in batches of train.batch_size sequences,
  /// on `device`, in bf16 autocast when `autocast` (CUDA only). Reads the task files of eval.tasks
  /// now, so a bad one stops the run before anything is written: throws DataError (task_file.h).
  Evaluator(const RunConfig& cfg, std::shared_ptr<const ValidationSet> val, c10::Device device, bool autocast);

  /// Whether the state after `step` (1-based) is evaluated: every eval.every steps and the `last`
  /// step of the run.
  bool should_evaluate(int64_t step, bool last) const;

  /// The validation loss of `model` now, nats/token: each rank evaluates every world_size-th batch
  /// and the token-weighted sums are added over the ranks (evaluate_sum), so every rank gets the
  /// single-process value up to float64 round-off. Every rank must call it (a collective). The
  /// value may be non-finite (a diverged model: the caller stops the run); it becomes last_loss().
  /// With eval.tasks, each task is scored the same way (score_task: rank r takes items r, r +
  /// world_size, ...; the counts are summed over the ranks) into last_tasks(). With
  /// eval.trigger_tokens, the loss's trigger / other split (evaluate_sum's domains, summed over the
  /// ranks in the same collective) goes to last_domains().
  double evaluate(GPTImpl& model, dist::DataParallel& dp);

  /// The value of the last evaluate() of this session; NaN before the first.
  double last_loss() const { return last_loss_; }
  /// The task accuracies of the last evaluate() (by task name); empty without eval.tasks or before it.
  const TaskAccuracies& last_tasks() const { return last_tasks_; }
  /// The trigger / other losses of the last evaluate(); none without eval.trigger_tokens or before it.
  const std::optional<DomainLosses>& last_domains() const { return last_domains_; }
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
  std::vector<Task> tasks_;
  TaskAccuracies last_tasks_;
  std::vector<int64_t> trigger_tokens_;
  std::optional<DomainLosses> last_domains_;
  double seconds_ = 0.0;
};

}  // namespace attnlab
