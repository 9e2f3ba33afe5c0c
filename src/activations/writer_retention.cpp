// Writer-row retention (SPEC section 5); formulas in include/attnlab/writer_retention.h.
#include "attnlab/writer_retention.h"

#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include <torch/torch.h>

#include "attnlab/channel_select.h"

namespace attnlab {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<int64_t> checked_layers(const RetentionOptions& o, int64_t n_layer) {
  std::vector<int64_t> layers = o.layers;
  if (layers.empty())
    for (int64_t l = 1; l <= n_layer; ++l) layers.push_back(l);
  if (std::set<int64_t>(layers.begin(), layers.end()).size() != layers.size())
    throw std::invalid_argument("retention layers name a layer twice");
  for (int64_t l : layers)
    if (l < 1 || l > n_layer)
      throw std::invalid_argument("retention layer " + std::to_string(l) + " outside [1, " + std::to_string(n_layer) +
                                  "] (residual layer L is written by block L-1)");
  return layers;
}

// Mean over batches of the parameter gradients and mean over sequences of |x| at the sink per
// residual layer [n_layer + 1, d_model], float64.
struct Pass {
  std::map<std::string, at::Tensor> grads;
  at::Tensor sink_abs;
  double mean_loss = 0.0;
};

Pass gradients(GPTImpl& model, const std::vector<Batch>& batches, int64_t position) {
  const auto device = model.parameters().front().device();
  const int64_t L = model.config().n_layer, d = model.config().d_model;
  Pass pass;
  pass.sink_abs = torch::zeros({L + 1, d}, torch::kDouble);
  int64_t rows = 0;
  ForwardHooks hooks;
  hooks.on_residual = [&](int64_t layer, const at::Tensor& x) {
    if (position >= x.size(1))
      throw std::invalid_argument("position " + std::to_string(position) + " outside a sequence of " + std::to_string(x.size(1)));
    pass.sink_abs[layer] += x.detach().select(1, position).abs().to(torch::kCPU, torch::kDouble).sum(0);
    return x;
  };
  model.zero_grad();
  for (const auto& batch : batches) {
    auto loss = lm_loss(model.forward(batch.x.to(device), &hooks), batch.y.to(device));
    loss.backward();
    pass.mean_loss += loss.item<double>() / double(batches.size());
    rows += batch.x.size(0);
  }
  pass.sink_abs /= double(rows);
  for (const auto& item : model.named_parameters()) {
    if (!item.value().grad().defined()) continue;
    pass.grads[item.key()] = item.value().grad().to(torch::kCPU, torch::kDouble) / double(batches.size());
  }
  model.zero_grad();
  return pass;
}

// AdamW's update direction u = m_hat / (sqrt(v_hat) + eps) of one parameter, float64, and its lambda
// and step; undefined u when the checkpoint holds no state for it.
struct Preconditioned {
  at::Tensor u;
  double weight_decay = kNaN;
  int64_t step = 0;
};

at::Tensor moment(const LoadedCheckpoint& ckpt, const std::string& key) {
  const auto it = ckpt.optimizer.find(key);
  if (it == ckpt.optimizer.end())
    throw std::invalid_argument(ckpt.dir.string() + ": the optimizer state has a step but no '" + key + "'");
  return it->second.to(torch::kDouble);
}

Preconditioned preconditioned(const LoadedCheckpoint* ckpt, const std::string& name) {
  Preconditioned out;
  if (ckpt == nullptr || ckpt->optimizer_groups.empty()) return out;
  for (const auto& group : ckpt->optimizer_groups) {
    bool mine = false;
    for (const auto& p : group["params"]) mine = mine || p == name;
    if (!mine) continue;
    out.weight_decay = group["weight_decay"].get<double>();
    const auto step = ckpt->optimizer.find("step." + name);
    if (step == ckpt->optimizer.end()) return out;  // never stepped: no moments to precondition with
    out.step = step->second.item<int64_t>();
    const double b1 = group["betas"][0].get<double>(), b2 = group["betas"][1].get<double>();
    const double eps = group["eps"].get<double>();
    const auto m = moment(*ckpt, "exp_avg." + name), v = moment(*ckpt, "exp_avg_sq." + name);
    const double t = double(out.step);
    out.u = (m / (1.0 - std::pow(b1, t))) / ((v / (1.0 - std::pow(b2, t))).sqrt() + eps);
    return out;
  }
  throw std::invalid_argument("the optimizer state has no parameter group holding '" + name + "'");
}

// G_pre is AdamW's per-element preconditioning of the update; the other optimizers have none a row
// could be read from, so their checkpoints are refused rather than given a G_pre that means something else.
void require_adamw(const LoadedCheckpoint* ckpt) {
  if (ckpt == nullptr || ckpt->optimizer_groups.empty() || ckpt->optimizer_name == OptimizerName::adamw) return;
  const bool sgd = ckpt->optimizer_name == OptimizerName::sgd;
  throw std::invalid_argument(
      "retention: " + ckpt->dir.string() + " was trained with optimizer " + to_string(ckpt->optimizer_name) +
      " (optim.name); G and G_pre are defined for adamw checkpoints only: G_pre reads AdamW's moments, and " +
      (sgd ? std::string("SGD has no preconditioner (its update is the momentum of g + lambda w)")
           : std::string("Muon orthogonalises the momentum of each whole matrix (Newton-Schulz), so no writer row has "
                         "a rate of its own")));
}

double retention_of(const at::Tensor& w, const at::Tensor& direction) {
  const double ww = (w * w).sum().item<double>();
  return ww > 0.0 ? -(w * direction).sum().item<double>() / ww : kNaN;
}

}  // namespace

RetentionResult writer_retention(GPTImpl& model, const std::vector<Batch>& batches, const LoadedCheckpoint* optimizer,
                                 const RetentionOptions& options) {
  if (batches.empty()) throw std::invalid_argument("retention needs at least one batch");
  require_adamw(optimizer);
  const int64_t d = model.config().d_model;
  if (options.top_k < 0 || options.top_k > d)
    throw std::invalid_argument("retention top_k " + std::to_string(options.top_k) + " outside [0, " + std::to_string(d) + "]");
  const auto layers = checked_layers(options, model.config().n_layer);
  const Pass pass = gradients(model, batches, options.position);
  const auto params = model.named_parameters();

  RetentionResult result;
  result.batches = int64_t(batches.size());
  result.mean_loss = pass.mean_loss;
  for (int64_t layer : layers) {
    const auto ranked = top_channels(pass.sink_abs[layer], options.top_k > 0 ? options.top_k : d);
    for (const char* writer : {"attn", "mlp"}) {
      for (const char* kind : {"weight", "bias"}) {
        const std::string name = "h." + std::to_string(layer - 1) + "." + writer + ".c_proj." + kind;
        const auto W = params[name].detach().to(torch::kCPU, torch::kDouble);
        const auto grad = pass.grads.count(name) ? pass.grads.at(name) : torch::zeros_like(W);
        const Preconditioned pre = preconditioned(optimizer, name);
        if (pre.u.defined()) result.optimizer_step = pre.step;
        const bool is_bias = std::string(kind) == "bias";
        double lambda = std::isnan(pre.weight_decay) ? (model.decays(name) ? options.weight_decay : 0.0) : pre.weight_decay;
        for (size_t rank = 0; rank < ranked.size(); ++rank) {
          const int64_t c = ranked[rank];
          RetentionRow row;
          row.layer = layer, row.writer = writer, row.param = name, row.channel = c, row.rank = int64_t(rank);
          row.sink_abs_x = pass.sink_abs[layer][c].item<double>();
          const auto w = W[c];  // the writer row of channel c: weight[c, :], or bias[c]
          row.norm = w.norm().item<double>();
          row.G = retention_of(w, grad[c]);
          if (pre.u.defined()) row.G_pre = retention_of(w, pre.u[c]);
          row.weight_decay = lambda;
          (is_bias ? result.biases : result.weights).push_back(std::move(row));
        }
      }
    }
  }
  return result;
}

}  // namespace attnlab
