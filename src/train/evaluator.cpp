// The evaluator: eval.every's cadence and the validation loss over the ranks (evaluator.h).
#include "attnlab/evaluator.h"

#include <chrono>
#include <limits>

#include "attnlab/evaluate.h"

namespace attnlab {

Evaluator::Evaluator(const RunConfig& cfg, std::shared_ptr<const ValidationSet> val, c10::Device device, bool autocast)
    : every_(cfg.eval.every), batch_size_(cfg.train.batch_size), val_(std::move(val)), device_(device),
      autocast_(autocast), last_loss_(std::numeric_limits<double>::quiet_NaN()) {}

bool Evaluator::should_evaluate(int64_t step, bool last) const { return last || step % every_ == 0; }

double Evaluator::evaluate(GPTImpl& model, dist::DataParallel& dp) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto part = evaluate_sum(model, *val_, batch_size_, device_, autocast_, dp.rank(), dp.world_size());
  const auto total = dp.sum({part.nats, double(part.tokens)});
  last_loss_ = total[0] / total[1];
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return last_loss_;
}

}  // namespace attnlab
