// Validation loss with junk injected into chosen layers, dose by dose (SPEC section 4).
#include <torch/torch.h>

#include <cmath>
#include <set>
#include <stdexcept>

#include "attnlab/injection.h"
#include "attnlab/model.h"
#include "attnlab/progress.h"

namespace attnlab {
namespace {

// Token-weighted mean loss over the batches, summed in float64 (as evaluate()).
double loss_over(GPTImpl& model, const std::vector<Batch>& batches, const c10::Device& device, const ForwardHooks* hooks,
                 int64_t& batch_index, Progress* progress) {
  double total = 0.0;
  int64_t count = 0;
  for (batch_index = 0; batch_index < int64_t(batches.size()); ++batch_index) {
    const auto& batch = batches[size_t(batch_index)];
    auto logits = model.forward(batch.x.to(device), hooks);
    total += lm_loss(logits, batch.y.to(device)).item<double>() * double(batch.y.numel());
    count += batch.y.numel();
    if (progress) progress->advance();
  }
  return total / double(count);
}

std::vector<int64_t> injected_layers(const GPTImpl& model, const InjectOptions& o) {
  if (!o.layers.empty()) return o.layers;
  std::vector<int64_t> all;
  for (int64_t l = 0; l < model.config().n_layer; ++l) all.push_back(l);
  return all;
}

}  // namespace

void check_inject_options(const GPTImpl& model, const InjectOptions& o) {
  if (o.kind == JunkKind::gate_direction && model.arm().gate != GateKind::projection)
    throw std::invalid_argument("junk kind gate_direction needs a projection gate (proj_gate, combo2, or renorm with "
                                "routing_gate: projection); arm '" + model.arm().name + "' has " +
                                (model.arm().gate == GateKind::none ? "no gate" : "a " + to_string(model.arm().gate) + " gate"));
  if (std::set<int64_t>(o.layers.begin(), o.layers.end()).size() != o.layers.size())
    throw std::invalid_argument("--layers names a layer twice");
  for (int64_t l : o.layers)
    if (l < 0 || l >= model.config().n_layer)
      throw std::invalid_argument("layer " + std::to_string(l) + " out of range: the model has layers 0.." +
                                  std::to_string(model.config().n_layer - 1));
  if (o.eps.empty()) throw std::invalid_argument("no eps given: pass e.g. --eps 0.2,0.4,0.8,1.6");
  for (double e : o.eps)
    if (!std::isfinite(e) || e < 0) throw std::invalid_argument("eps must be finite and >= 0, got " + std::to_string(e));
}

InjectOutcome inject_model(GPTImpl& model, const std::vector<Batch>& batches, const c10::Device& device,
                           const InjectOptions& o, Progress* progress) {
  check_inject_options(model, o);
  torch::NoGradGuard no_grad;
  const auto layers = injected_layers(model, o);
  const int64_t layer_sets = 1 + (o.per_layer ? int64_t(layers.size()) : 0);
  if (progress) progress->add_total(int64_t(batches.size()) * (1 + int64_t(o.eps.size()) * layer_sets));
  int64_t batch_index = 0;
  const double clean = loss_over(model, batches, device, nullptr, batch_index, progress);

  auto doses = [&](const std::set<int64_t>& layers) {
    std::vector<DoseLoss> out;
    for (double eps : o.eps) {
      ForwardHooks hooks;
      hooks.edit_values = [&](int64_t layer, const at::Tensor& v) {
        if (!layers.count(layer)) return v;
        const int64_t T = v.size(2) - (model.arm().sink_token ? 1 : 0);
        const auto draws = draw_junk(o.kind, o.seed, layer, batch_index, v.size(0), v.size(1), T, v.size(3));
        const auto gate_w = model.h[layer]->as<Block>()->attn->arm_params().gate_w;
        return inject_junk(v, junk_directions(o.kind, draws, v, gate_w, model.arm().sink_token).to(v.device()), eps,
                           o.cutoff);
      };
      const double loss = loss_over(model, batches, device, &hooks, batch_index, progress);
      out.push_back({eps, loss, loss - clean});
    }
    return out;
  };

  InjectOutcome result{clean, layers, doses(std::set<int64_t>(layers.begin(), layers.end())), std::nullopt};
  if (o.per_layer) {
    result.per_layer.emplace();
    for (int64_t l : layers) result.per_layer->push_back({l, doses({l})});
  }
  return result;
}

}  // namespace attnlab
