// Running a model's reference attention layer by layer and feeding the probe statistics. Only one
// layer's T x T probabilities exist at a time: the hook consumes them before the next layer runs.
#include <torch/torch.h>

#include "attnlab/attention.h"
#include "attnlab/model.h"
#include "attnlab/probes.h"
#include "attnlab/progress.h"

namespace attnlab {
namespace {

// Sets the reference backend for the probe and puts the model's own back afterwards.
class ReferenceBackendScope {
 public:
  explicit ReferenceBackendScope(GPTImpl& model)
      : model_(model), saved_(model.h[0]->as<Block>()->attn->backend) {
    model_.set_attention_backend(AttentionBackend::reference);
  }
  ~ReferenceBackendScope() { model_.set_attention_backend(saved_); }
  ReferenceBackendScope(const ReferenceBackendScope&) = delete;
  ReferenceBackendScope& operator=(const ReferenceBackendScope&) = delete;

 private:
  GPTImpl& model_;
  AttentionBackend saved_;
};

}  // namespace

ProbeSummary probe_model(GPTImpl& model, const std::vector<Batch>& batches, const c10::Device& device,
                         Progress* progress, const std::vector<int64_t>& trigger_tokens) {
  torch::NoGradGuard no_grad;
  ReferenceBackendScope reference(model);
  const auto& cfg = model.config();
  auto features = probe_features(cfg);
  features.triggers = !trigger_tokens.empty();
  std::vector<LayerProbeSums> sums(size_t(cfg.n_layer), LayerProbeSums(cfg.n_head));
  at::Tensor trigger;  // (B, T) of the batch in flight, in the model's positions

  ForwardHooks hooks;
  hooks.return_probs = true;
  hooks.read_norms = true;
  hooks.on_attention = [&](const LayerTrace& t) {
    LayerProbeInputs in;
    in.probs = t.attention.probs;        // (B, H, T, T)
    in.read_norm = t.keys.read_norm;     // (B, H, T)
    if (features.sink) in.phantom = phantom_mass(t.attention.lse, t.sink_logit);
    if (features.gate) in.gate = t.keys.gate;
    if (features.out_gate) in.out_gate = t.out_gate;  // (B, T, H) or (B, T, H d)
    in.window = t.window;
    in.trigger = trigger;
    accumulate_layer(in, sums[size_t(t.layer)]);
  };
  hooks.on_residual = [&](int64_t layer, const at::Tensor& x) {  // layer l + 1: after block l
    if (layer >= 1) accumulate_residual(x, sums[size_t(layer - 1)]);
    return x;
  };
  if (progress) progress->add_total(int64_t(batches.size()));
  for (const auto& batch : batches) {
    if (features.triggers) trigger = trigger_queries(batch.x, trigger_tokens, model.arm().sink_token);
    model.forward(batch.x.to(device), &hooks);
    if (progress) progress->advance();
  }
  return probe_summary(sums, features);
}

}  // namespace attnlab
