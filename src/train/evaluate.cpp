#include "attnlab/evaluate.h"

#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "attnlab/device.h"

namespace attnlab {

LossSum evaluate_sum(GPTImpl& model, const ValidationSet& val, int64_t batch_size, const c10::Device& device,
                     bool autocast_bf16, int64_t shard, int64_t num_shards) {
  if (num_shards < 1 || shard < 0 || shard >= num_shards) {
    throw std::invalid_argument(fmt::format("evaluation shard {} of {}: need 0 <= shard < num_shards", shard, num_shards));
  }
  torch::NoGradGuard no_grad;
  AutocastGuard autocast(device, autocast_bf16);
  LossSum sum;  // summed in double: a long validation pass must not lose nats to round-off
  for (int64_t b = shard; b < val.num_batches(batch_size); b += num_shards) {
    const auto batch = val.batch(b, batch_size);
    auto logits = model.forward(batch.x.to(device));
    auto loss = lm_loss(logits, batch.y.to(device));  // mean over this batch's targets
    sum.nats += loss.item<double>() * double(batch.y.numel());
    sum.tokens += batch.y.numel();
  }
  return sum;
}

double evaluate(GPTImpl& model, const ValidationSet& val, int64_t batch_size, const c10::Device& device,
                bool autocast_bf16) {
  const auto sum = evaluate_sum(model, val, batch_size, device, autocast_bf16, 0, 1);
  return sum.nats / double(sum.tokens);
}

}  // namespace attnlab
