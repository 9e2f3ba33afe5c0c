#include "attnlab/evaluate.h"

#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/torch.h>

#include "attnlab/device.h"

namespace attnlab {
namespace {

// One batch's per-token cross-entropies, split by whether the target's input token is a trigger.
void add_domains(const at::Tensor& logits, const Batch& batch, const at::Tensor& triggers, DomainSums& d) {
  auto flat = logits.reshape({-1, logits.size(-1)});  // (B T, V)
  if (flat.scalar_type() != at::kDouble) flat = flat.to(at::kFloat);  // as lm_loss: at least float32
  const auto targets = batch.y.reshape({-1}).to(flat.device());
  const auto per_token = at::cross_entropy_loss(flat, targets, {}, at::Reduction::None).to(torch::kCPU, torch::kDouble);
  const auto is_trigger = torch::isin(batch.x.reshape({-1}), triggers);  // (B T) bool, on the CPU
  const int64_t n_trigger = is_trigger.sum().item<int64_t>();
  d.trigger_nats += per_token.masked_select(is_trigger).sum().item<double>();
  d.trigger_tokens += n_trigger;
  d.other_nats += per_token.masked_select(is_trigger.logical_not()).sum().item<double>();
  d.other_tokens += per_token.numel() - n_trigger;
}

double mean_or_nan(double nats, int64_t tokens) {
  return tokens > 0 ? nats / double(tokens) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

DomainLosses domain_losses(const DomainSums& s) {
  return {mean_or_nan(s.trigger_nats, s.trigger_tokens), mean_or_nan(s.other_nats, s.other_tokens)};
}

LossSum evaluate_sum(GPTImpl& model, const ValidationSet& val, int64_t batch_size, const c10::Device& device,
                     bool autocast_bf16, int64_t shard, int64_t num_shards, const std::vector<int64_t>& trigger_tokens) {
  if (num_shards < 1 || shard < 0 || shard >= num_shards) {
    throw std::invalid_argument(fmt::format("evaluation shard {} of {}: need 0 <= shard < num_shards", shard, num_shards));
  }
  torch::NoGradGuard no_grad;
  AutocastGuard autocast(device, autocast_bf16);
  LossSum sum;  // summed in double: a long validation pass must not lose nats to round-off
  const auto triggers = torch::tensor(trigger_tokens, torch::kLong);
  for (int64_t b = shard; b < val.num_batches(batch_size); b += num_shards) {
    const auto batch = val.batch(b, batch_size);
    auto logits = model.forward(batch.x.to(device));
    auto loss = lm_loss(logits, batch.y.to(device));  // mean over this batch's targets
    sum.nats += loss.item<double>() * double(batch.y.numel());
    sum.tokens += batch.y.numel();
    if (!trigger_tokens.empty()) add_domains(logits, batch, triggers, sum.domains);
  }
  return sum;
}

double evaluate(GPTImpl& model, const ValidationSet& val, int64_t batch_size, const c10::Device& device,
                bool autocast_bf16) {
  const auto sum = evaluate_sum(model, val, batch_size, device, autocast_bf16, 0, 1);
  return sum.nats / double(sum.tokens);
}

}  // namespace attnlab
