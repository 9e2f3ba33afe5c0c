// Validation loss with junk injected into chosen layers, dose by dose (SPEC section 4).
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

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
    throw std::invalid_argument("--blocks names a block twice");
  for (int64_t l : o.layers)
    if (l < 0 || l >= model.config().n_layer)
      throw std::invalid_argument("--blocks: block " + std::to_string(l) + " out of range: the model has blocks 0.." +
                                  std::to_string(model.config().n_layer - 1));
  if (o.eps.empty()) throw std::invalid_argument("no eps given: pass e.g. --eps 0.2,0.4,0.8,1.6");
  for (double e : o.eps)
    if (!std::isfinite(e) || e < 0) throw std::invalid_argument("eps must be finite and >= 0, got " + std::to_string(e));
  if (std::set<double>(o.eps.begin(), o.eps.end()).size() != o.eps.size())
    throw std::invalid_argument("--eps names a dose twice");
}

namespace {

[[noreturn]] void not_from(const std::string& what) {
  throw std::invalid_argument("injection result: " + what);
}

// One dose per eps of the options, in their order, each increase = loss - clean.
void check_doses(const std::vector<DoseLoss>& doses, const std::vector<double>& eps, double clean, const std::string& at) {
  if (doses.size() != eps.size())
    not_from(at + " holds " + std::to_string(doses.size()) + " doses for " + std::to_string(eps.size()) + " eps");
  for (size_t k = 0; k < doses.size(); ++k) {
    const auto& d = doses[k];
    if (d.eps != eps[k]) not_from(at + "[" + std::to_string(k) + "] has eps " + std::to_string(d.eps));
    const double want = d.loss - clean;
    const bool same = !std::isfinite(want) ? !std::isfinite(d.increase)
                                           : std::fabs(d.increase - want) <= 1e-12 * std::max(1.0, std::fabs(want));
    if (!same) not_from(at + "[" + std::to_string(k) + "].increase is not loss - clean_loss");
  }
}

}  // namespace

void check_inject_outcome(const InjectOutcome& r, const GPTImpl& model, const InjectOptions& o) {
  const auto layers = injected_layers(model, o);
  if (r.layers != layers) not_from("its layers are not the ones the options inject");
  check_doses(r.doses, o.eps, r.clean_loss, "doses");
  if (r.per_layer.has_value() != o.per_layer)
    not_from(o.per_layer ? "per_layer results are missing" : "per_layer results were not asked for");
  if (!r.per_layer) return;
  if (r.per_layer->size() != layers.size()) not_from("per_layer does not hold one entry per injected layer");
  for (size_t k = 0; k < layers.size(); ++k) {
    const auto& pl = (*r.per_layer)[k];
    if (pl.layer != layers[k]) not_from("per_layer[" + std::to_string(k) + "] is layer " + std::to_string(pl.layer));
    check_doses(pl.doses, o.eps, r.clean_loss, "per_layer[" + std::to_string(k) + "].doses");
  }
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
