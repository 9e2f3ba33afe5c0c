// The matched-rms ceiling experiment; definitions in include/attnlab/rms_ceiling.h.
#include "attnlab/rms_ceiling.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include <torch/torch.h>

#include "attnlab/channel_select.h"

namespace attnlab {
namespace {

void check(const GPTImpl& model, const CeilingOptions& o) {
  const int64_t n_layer = model.config().n_layer, d = model.config().d_model;
  if (o.layer < 0 || o.layer >= n_layer)
    throw std::invalid_argument("ceiling layer " + std::to_string(o.layer) + " outside [0, " + std::to_string(n_layer) +
                                ") (the state entering block l)");
  if (!(o.shift > 0.0) || !std::isfinite(o.shift)) throw std::invalid_argument("ceiling shift must be > 0, got " + std::to_string(o.shift));
  if (o.top < 1 || o.top > d) throw std::invalid_argument("ceiling top " + std::to_string(o.top) + " outside [1, " + std::to_string(d) + "]");
  if (o.random_k < 0 || o.random_k > d - o.top)
    throw std::invalid_argument("ceiling random_k " + std::to_string(o.random_k) + " outside [0, d_model - top = " +
                                std::to_string(d - o.top) + "]");
}

// The residual stream [B, T, d] entering block `layer`.
at::Tensor state_entering(GPTImpl& model, const Batch& batch, int64_t layer) {
  at::Tensor captured;
  ForwardHooks hooks;
  hooks.on_residual = [&](int64_t l, const at::Tensor& x) {
    if (l == layer) captured = x.detach().clone();
    return x;
  };
  model.forward(batch.x.to(model.parameters().front().device()), &hooks);
  return captured;
}

std::vector<int64_t> random_outside(const std::vector<int64_t>& ranked, int64_t top, int64_t k, uint64_t seed) {
  std::vector<int64_t> pool(ranked.begin() + top, ranked.end());
  std::sort(pool.begin(), pool.end());  // a draw that does not depend on the ranking's order
  std::mt19937_64 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  pool.resize(k);
  return pool;
}

at::Tensor cosine_rows(const at::Tensor& a, const at::Tensor& b) {  // (B, d) x (B, d) -> (B)
  return (a * b).sum(1) / (a.norm(2, 1) * b.norm(2, 1));
}

CeilingArm run_arm(BlockImpl& block, const at::Tensor& x, const at::Tensor& out, int64_t layer, int64_t position,
                   double shift, std::string name, std::vector<int64_t> channels) {
  const int64_t d = x.size(2);
  const auto x_in = x.select(1, position).to(torch::kDouble);  // (B, d)
  const auto idx = torch::tensor(channels, torch::kLong).to(x.device());
  const auto in_set = x_in.index_select(1, idx).pow(2).sum(1);  // (B)
  if ((in_set == 0).any().item<bool>())
    throw std::invalid_argument("ceiling arm '" + name + "': its channels are all zero in some sequence");
  const auto rms_in = x_in.pow(2).mean(1).sqrt();
  const auto g = (1.0 + double(d) * rms_in.pow(2) * ((1.0 + shift) * (1.0 + shift) - 1.0) / in_set).sqrt();  // (B)

  auto edited = x.clone();
  auto row = edited.select(1, position);
  row.index_copy_(1, idx, row.index_select(1, idx) * g.to(x.scalar_type()).unsqueeze(1));
  const auto out_edited = block.forward(edited, layer);

  const auto x_in2 = edited.select(1, position).to(torch::kCPU, torch::kDouble);
  const auto y = out.select(1, position).to(torch::kCPU, torch::kDouble);
  const auto y2 = out_edited.select(1, position).to(torch::kCPU, torch::kDouble);
  const auto xin = x_in.cpu();
  const auto excess = x_in2.pow(2).mean(1).sqrt() - rms_in.cpu();  // float64 on the CPU from here on
  const auto out_shift = y2.pow(2).mean(1).sqrt() - y.pow(2).mean(1).sqrt();

  CeilingArm arm;
  arm.name = std::move(name);
  arm.channels = std::move(channels);
  arm.growth = g.mean().item<double>();
  arm.excess = excess.mean().item<double>();
  arm.out_shift = out_shift.mean().item<double>();
  arm.removed_share = (1.0 - out_shift / excess).mean().item<double>();
  arm.distortion_in = (1.0 - cosine_rows(x_in2, xin)).mean().item<double>();
  arm.distortion_out = (1.0 - cosine_rows(y2, y)).mean().item<double>();
  return arm;
}

}  // namespace

CeilingResult rms_ceiling(GPTImpl& model, const Batch& batch, const CeilingOptions& options) {
  check(model, options);
  torch::NoGradGuard no_grad;
  const int64_t T = batch.x.size(1) + (model.arm().sink_token ? 1 : 0);
  if (options.position < 0 || options.position >= T)
    throw std::invalid_argument("position " + std::to_string(options.position) + " outside a sequence of " + std::to_string(T));
  const auto x = state_entering(model, batch, options.layer);  // (B, T, d)
  auto& block = *model.h[options.layer]->as<Block>();
  const auto out = block.forward(x, options.layer);
  const auto magnitude = x.select(1, options.position).abs().to(torch::kCPU, torch::kDouble).mean(0);
  const auto ranked = top_channels(magnitude, magnitude.numel());

  CeilingResult result;
  result.rms_in = x.select(1, options.position).to(torch::kDouble).pow(2).mean(1).sqrt().mean().item<double>();
  result.rms_out = out.select(1, options.position).to(torch::kDouble).pow(2).mean(1).sqrt().mean().item<double>();
  const int64_t p = options.position;
  result.arms.push_back(run_arm(block, x, out, options.layer, p, options.shift, "dominant", {ranked[0]}));
  result.arms.push_back(run_arm(block, x, out, options.layer, p, options.shift, "top",
                                std::vector<int64_t>(ranked.begin(), ranked.begin() + options.top)));
  if (options.random_k > 0)
    result.arms.push_back(run_arm(block, x, out, options.layer, p, options.shift, "random",
                                  random_outside(ranked, options.top, options.random_k, options.seed)));
  return result;
}

}  // namespace attnlab
