#include "attnlab/evaluate.h"

#include <torch/torch.h>

#include "attnlab/device.h"

namespace attnlab {

double evaluate(GPTImpl& model, const ValidationSet& val, int64_t batch_size, const c10::Device& device,
                bool autocast_bf16) {
  torch::NoGradGuard no_grad;
  AutocastGuard autocast(device, autocast_bf16);
  double total = 0.0;  // summed in double: a long validation pass must not lose nats to round-off
  int64_t count = 0;
  for (int64_t b = 0; b < val.num_batches(batch_size); ++b) {
    const auto batch = val.batch(b, batch_size);
    auto logits = model.forward(batch.x.to(device));
    auto loss = lm_loss(logits, batch.y.to(device));  // mean over this batch's targets
    total += loss.item<double>() * double(batch.y.numel());
    count += batch.y.numel();
  }
  return total / double(count);
}

}  // namespace attnlab
