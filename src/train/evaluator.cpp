// The evaluator: eval.every's cadence, the validation loss and the task accuracies over the ranks
// (evaluator.h).
#include "attnlab/evaluator.h"

#include <chrono>
#include <limits>

#include "attnlab/evaluate.h"
#include "attnlab/task_scoring.h"

namespace attnlab {
namespace {

std::vector<Task> read_tasks(const RunConfig& cfg) {
  std::vector<Task> tasks;
  for (const auto& path : cfg.eval.tasks) tasks.push_back(read_task_file(path, cfg.model.vocab_size, cfg.model.block_size));
  return tasks;
}

}  // namespace

Evaluator::Evaluator(const RunConfig& cfg, std::shared_ptr<const ValidationSet> val, c10::Device device, bool autocast)
    : every_(cfg.eval.every), batch_size_(cfg.train.batch_size), val_(std::move(val)), device_(device),
      autocast_(autocast), last_loss_(std::numeric_limits<double>::quiet_NaN()), tasks_(read_tasks(cfg)),
      trigger_tokens_(cfg.eval.trigger_tokens) {}

bool Evaluator::should_evaluate(int64_t step, bool last) const { return last || step % every_ == 0; }

double Evaluator::evaluate(GPTImpl& model, dist::DataParallel& dp) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto part =
      evaluate_sum(model, *val_, batch_size_, device_, autocast_, dp.rank(), dp.world_size(), trigger_tokens_);
  const auto& d = part.domains;  // then 3 counts per task: one collective
  std::vector<double> sums = {part.nats, double(part.tokens), d.trigger_nats, double(d.trigger_tokens),
                              d.other_nats, double(d.other_tokens)};
  for (const auto& task : tasks_) {
    const auto c = score_task(model, task, device_, autocast_, dp.rank(), dp.world_size());
    sums.insert(sums.end(), {double(c.correct), double(c.correct_norm), double(c.n)});
  }
  const auto total = dp.sum(sums);
  last_loss_ = total[0] / total[1];
  last_domains_.reset();  // counts below 2^53: exact in a double
  if (!trigger_tokens_.empty())
    last_domains_ = domain_losses({total[2], int64_t(total[3]), total[4], int64_t(total[5])});
  last_tasks_.clear();
  for (size_t k = 0; k < tasks_.size(); ++k) {
    const double* c = &total[6 + 3 * k];
    last_tasks_[tasks_[k].name] = task_accuracy(tasks_[k], {int64_t(c[0]), int64_t(c[1]), int64_t(c[2])});
  }
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return last_loss_;
}

}  // namespace attnlab
