// SPEC section 5's per-state statistics, in float64 on the host (d_model values: cheap).
#include "attnlab/activation_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace attnlab {

std::vector<double> abs_channels(const at::Tensor& x) {
  if (!x.defined() || x.dim() != 1 || x.numel() == 0)
    throw std::invalid_argument("activation_stats: expected a non-empty hidden state x [d_model]");
  const auto a = x.detach().to(torch::kCPU, torch::kDouble).abs().contiguous();
  return std::vector<double>(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
}

std::vector<int64_t> top_channels(const std::vector<double>& abs_values, int64_t k) {
  std::vector<int64_t> order(abs_values.size());
  std::iota(order.begin(), order.end(), 0);
  const auto n = std::min<int64_t>(std::max<int64_t>(k, 0), static_cast<int64_t>(order.size()));
  // stable: equal values keep ascending channel order
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return abs_values[i] > abs_values[j]; });
  order.resize(n);
  return order;
}

namespace {

double median(std::vector<double> v) {
  const size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (n % 2 == 1) return v[mid];
  const double upper = v[mid];
  return 0.5 * (upper + *std::max_element(v.begin(), v.begin() + mid));
}

}  // namespace

ActivationStats activation_stats(const at::Tensor& x, int64_t top_k, const MassiveCriterion& massive) {
  if (top_k < 1) throw std::invalid_argument("activation_stats: top_k must be >= 1");
  const auto abs_x = abs_channels(x);
  const auto signed_x = x.detach().to(torch::kCPU, torch::kDouble).contiguous();
  const double* xs = signed_x.data_ptr<double>();
  ActivationStats s;
  const auto top = top_channels(abs_x, std::max<int64_t>(top_k, 3));
  s.argmax = top[0];
  s.max_abs = abs_x[s.argmax];
  for (size_t i = 0; i < top.size() && static_cast<int64_t>(i) < top_k; ++i) s.top.push_back({top[i], xs[top[i]]});
  s.median_abs = median(abs_x);
  s.ratio = s.median_abs > 0 ? s.max_abs / s.median_abs
                             : (s.max_abs > 0 ? std::numeric_limits<double>::infinity() : 0.0);
  double sum_sq = 0.0;
  for (double a : abs_x) sum_sq += a * a;
  s.rms = std::sqrt(sum_sq / static_cast<double>(abs_x.size()));
  double top3_sq = 0.0;
  for (size_t i = 0; i < std::min<size_t>(3, top.size()); ++i) top3_sq += abs_x[top[i]] * abs_x[top[i]];
  s.top3_share = sum_sq > 0 ? top3_sq / sum_sq : 0.0;
  s.massive = s.max_abs > massive.min_max && s.ratio >= massive.min_ratio;
  return s;
}

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return values[i] < values[j]; });
  std::vector<double> ranks(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double rank = 0.5 * double(i + j) + 1.0;  // mean of the 1-based ranks i+1 .. j+1
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2)
    throw std::invalid_argument("spearman: needs two rankings of the same length >= 2, got " +
                                std::to_string(a.size()) + " and " + std::to_string(b.size()));
  const auto ra = average_ranks(a), rb = average_ranks(b);
  const double mean = 0.5 * double(a.size() + 1);  // the mean of average ranks is always (n + 1) / 2
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0) return std::numeric_limits<double>::quiet_NaN();
  return sab / std::sqrt(saa * sbb);
}

double jaccard(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const std::set<int64_t> sa(a.begin(), a.end()), sb(b.begin(), b.end());
  if (sa.empty() && sb.empty()) return 1.0;
  size_t common = 0;
  for (auto c : sa) common += sb.count(c);
  return double(common) / double(sa.size() + sb.size() - common);
}

std::optional<int64_t> lock_in_step(const std::vector<int64_t>& steps, const std::vector<int64_t>& argmax) {
  if (steps.size() != argmax.size())
    throw std::invalid_argument("lock_in_step: " + std::to_string(steps.size()) + " steps but " +
                                std::to_string(argmax.size()) + " dominant channels");
  if (steps.empty()) return std::nullopt;
  size_t i = steps.size() - 1;
  while (i > 0 && argmax[i - 1] == argmax.back()) --i;
  return steps[i];
}

nlohmann::json to_json(const ActivationStats& s) {
  nlohmann::json top = nlohmann::json::array();
  for (const auto& cv : s.top) top.push_back({cv.channel, cv.value});
  return {{"max_abs", s.max_abs},   {"argmax", s.argmax},
          {"top", top},             {"median_abs", s.median_abs},
          {"ratio", std::isinf(s.ratio) ? nlohmann::json() : nlohmann::json(s.ratio)},
          {"rms", s.rms},           {"top3_share", s.top3_share},
          {"massive", s.massive}};
}

ActivationStats activation_stats_from_json(const nlohmann::json& j) {
  ActivationStats s;
  s.max_abs = j.at("max_abs").get<double>();
  s.argmax = j.at("argmax").get<int64_t>();
  for (const auto& cv : j.at("top")) s.top.push_back({cv.at(0).get<int64_t>(), cv.at(1).get<double>()});
  s.median_abs = j.at("median_abs").get<double>();
  s.ratio = j.at("ratio").is_null() ? std::numeric_limits<double>::infinity() : j.at("ratio").get<double>();
  s.rms = j.at("rms").get<double>();
  s.top3_share = j.at("top3_share").get<double>();
  s.massive = j.at("massive").get<bool>();
  return s;
}

}  // namespace attnlab
