// ForwardHooks::on_residual collects each layer's stream; only two rows per layer leave the device.
#include "attnlab/activation_capture.h"

#include <stdexcept>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/model.h"

namespace attnlab {
namespace {

// (sequence, position) of the largest |x_c| in x [B, T, d_model].
std::pair<int64_t, int64_t> peak_location(const at::Tensor& x) {
  const auto per_position = x.detach().abs().amax(-1).to(torch::kFloat).flatten();  // [B * T]
  const int64_t flat = per_position.argmax().item<int64_t>();
  return {flat / x.size(1), flat % x.size(1)};
}

}  // namespace

ActivationCapture capture_activations(GPTImpl& model, const at::Tensor& idx, const CaptureOptions& options) {
  if (!idx.defined() || idx.dim() != 2 || idx.numel() == 0)
    throw std::invalid_argument("capture_activations: expected a non-empty token batch idx [B, T]");
  const int64_t n_layer = model.config().n_layer;
  if (options.tokens_layer < -1 || options.tokens_layer > n_layer)
    throw std::invalid_argument("capture_activations: layer " + std::to_string(options.tokens_layer) +
                                " is outside 0.." + std::to_string(n_layer));
  ActivationCapture capture;
  ForwardHooks hooks;
  hooks.on_residual = [&](int64_t layer, const at::Tensor& x) {
    LayerActivations a;
    a.layer = layer;
    const auto sink_state = x[0][0];
    a.sink = activation_stats(sink_state, options.top_k, options.massive);
    a.sink_abs = abs_channels(sink_state);
    std::tie(a.peak_sequence, a.peak_position) = peak_location(x);
    a.peak = activation_stats(x[a.peak_sequence][a.peak_position], options.top_k, options.massive);
    if (layer == options.tokens_layer) {
      capture.tokens_abs = x[a.peak_sequence].detach().to(torch::kCPU, torch::kDouble).abs();
      capture.tokens_layer = layer;
      capture.tokens_sequence = a.peak_sequence;
    }
    capture.layers.push_back(std::move(a));
    return x;
  };
  torch::NoGradGuard no_grad;
  const auto device = model.wte->weight.device();
  model.forward(idx.to(device), &hooks);
  return capture;
}

nlohmann::json layers_json(const ActivationCapture& capture) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& a : capture.layers) {
    auto peak = to_json(a.peak);
    peak["sequence"] = a.peak_sequence;
    peak["position"] = a.peak_position;
    layers.push_back({{"layer", a.layer}, {"sink", to_json(a.sink)}, {"peak", peak}});
  }
  return layers;
}

}  // namespace attnlab
