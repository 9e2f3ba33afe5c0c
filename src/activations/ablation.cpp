// Sink-token channel ablation (SPEC section 5); definitions in include/attnlab/ablation.h.
#include "attnlab/ablation.h"

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

namespace attnlab {
namespace {

void check_position(int64_t position, int64_t T) {
  if (position < 0 || position >= T)
    throw std::invalid_argument("position " + std::to_string(position) + " outside a sequence of " + std::to_string(T) +
                                " positions");
}

// Residual positions of a batch: the sink_token arm prepends its learned token inside forward().
int64_t residual_length(const GPTImpl& model, const Batch& batch) {
  return batch.x.size(1) + (model.arm().sink_token ? 1 : 0);
}

}  // namespace

AblationMode parse_ablation_mode(const std::string& text) {
  AblationMode mode;
  mode.text = text;
  if (text == "zero") return mode;
  if (text == "mean") {
    mode.kind = AblationMode::Kind::mean;
    return mode;
  }
  if (text.rfind("scale:", 0) == 0) {
    mode.kind = AblationMode::Kind::scale;
    const std::string a = text.substr(6);
    size_t used = 0;
    try {
      mode.alpha = std::stod(a, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (a.empty() || used != a.size() || !std::isfinite(mode.alpha))
      throw std::invalid_argument("ablation mode '" + text + "': scale needs a finite number, e.g. scale:0.5");
    return mode;
  }
  throw std::invalid_argument("ablation mode '" + text + "': expected zero | mean | scale:a");
}

at::Tensor ablate_state(const at::Tensor& x, int64_t position, const std::vector<int64_t>& channels,
                        const AblationMode& mode) {
  const int64_t T = x.size(1), d = x.size(2);
  check_position(position, T);
  for (int64_t c : channels)
    if (c < 0 || c >= d) throw std::invalid_argument("channel " + std::to_string(c) + " outside [0, " + std::to_string(d) + ")");
  if (mode.kind == AblationMode::Kind::mean && T < 2)
    throw std::invalid_argument("ablation mode 'mean' needs another position to average over (T = 1)");
  auto out = x.clone();
  if (channels.empty()) return out;
  const auto idx = torch::tensor(channels, torch::kLong).to(x.device());
  auto row = out.select(1, position);  // (B, d) view into out
  switch (mode.kind) {
    case AblationMode::Kind::zero:
      row.index_fill_(1, idx, 0.0);
      break;
    case AblationMode::Kind::scale:
      row.index_copy_(1, idx, row.index_select(1, idx) * mode.alpha);
      break;
    case AblationMode::Kind::mean: {
      auto others = (x.sum(1) - x.select(1, position)) / double(T - 1);  // (B, d): mean over t != position
      row.index_copy_(1, idx, others.index_select(1, idx));
      break;
    }
  }
  return out;
}

AblationPass measure_pass(GPTImpl& model, const Batch& batch, int64_t layer, int64_t position,
                          const std::function<at::Tensor(const at::Tensor&)>& edit) {
  const int64_t n_layer = model.config().n_layer;
  if (layer < 0 || layer > n_layer)
    throw std::invalid_argument("ablation layer " + std::to_string(layer) + " outside [0, " + std::to_string(n_layer) +
                                "] (0 = embedding output, n_layer = input of the final LayerNorm)");
  check_position(position, residual_length(model, batch));
  const auto device = model.parameters().front().device();
  const int64_t B = batch.x.size(0);

  at::Tensor leaf;  // the state at (layer, position), [B, d]: the gradient is taken with respect to it
  AblationPass pass;
  pass.sink_attention.assign(n_layer, 0.0);
  ForwardHooks hooks;
  hooks.return_probs = true;
  hooks.on_residual = [&](int64_t l, const at::Tensor& x) {
    if (l != layer) return x;
    // Downstream of here nothing needs earlier gradients: cut the graph at the edited state.
    auto edited = edit(x.detach());
    leaf = edited.select(1, position).clone().requires_grad_(true);
    return at::cat({edited.narrow(1, 0, position), leaf.unsqueeze(1),
                    edited.narrow(1, position + 1, edited.size(1) - position - 1)},
                   1);
  };
  hooks.on_attention = [&](const LayerTrace& trace) {
    const auto& probs = trace.attention.probs;  // (B, H, T, T)
    if (!probs.defined()) throw std::invalid_argument("the attention backend returned no probabilities (use reference)");
    const int64_t T = probs.size(2);
    if (position + 1 >= T) return;  // no later query: nothing to average
    auto received = probs.detach().select(3, position).narrow(2, position + 1, T - position - 1);  // (B, H, Tq)
    pass.sink_attention[trace.layer] = received.to(torch::kDouble).mean().item<double>();
  };
  auto loss = lm_loss(model.forward(batch.x.to(device), &hooks), batch.y.to(device));
  // L = mean_b L_b over sequences of equal length, and x_b reaches only L_b: dL_b/dx_b = B dL/dx_b.
  auto grad = torch::autograd::grad({loss}, {leaf})[0] * double(B);
  pass.loss = loss.item<double>();
  pass.state = leaf.detach().to(torch::kCPU, torch::kDouble);
  pass.grad = grad.detach().to(torch::kCPU, torch::kDouble);
  const auto rms_b = pass.state.pow(2).mean(1).sqrt();
  const auto gnorm_b = pass.grad.norm(2, 1);
  pass.rms = rms_b.mean().item<double>();
  pass.grad_norm = gnorm_b.mean().item<double>();
  pass.product = (rms_b * gnorm_b).mean().item<double>();
  return pass;
}

AblationResult ablate(GPTImpl& model, const Batch& batch, const AblationOptions& options) {
  // Check the edit before any pass runs, so bad input costs no forward pass.
  const int64_t d = model.config().d_model, T = residual_length(model, batch);
  if (options.channels.kind == ChannelSpec::Kind::list) {
    for (int64_t c : options.channels.channels)
      if (c < 0 || c >= d) throw std::invalid_argument("channel " + std::to_string(c) + " outside [0, " + std::to_string(d) + ")");
  } else if (options.channels.k < 1 || options.channels.k > d) {
    throw std::invalid_argument("channel spec '" + options.channels.text + "': k outside [1, " + std::to_string(d) + "]");
  }
  check_position(options.position, T);
  if (options.mode.kind == AblationMode::Kind::mean && T < 2)
    throw std::invalid_argument("ablation mode 'mean' needs another position to average over (T = 1)");
  AblationResult result;
  result.reference = measure_pass(model, batch, options.layer, options.position, [](const at::Tensor& x) { return x; });
  result.channels = resolve_channels(options.channels, result.reference.state.abs().mean(0), options.seed);
  const auto edit = [&](const at::Tensor& x) { return ablate_state(x, options.position, result.channels, options.mode); };
  result.ablated = measure_pass(model, batch, options.layer, options.position, edit);
  return result;
}

}  // namespace attnlab
