// Bondarenko et al.'s outlier statistics of one sequence (outlier_stats.h).
#include "attnlab/outlier_stats.h"

#include <torch/torch.h>

#include <stdexcept>

namespace attnlab {

OutlierStats outlier_stats(const at::Tensor& x) {
  if (!x.defined() || x.numel() == 0) throw std::invalid_argument("outlier_stats: x must hold at least one value");
  const auto v = x.detach().reshape({-1}).to(at::kDouble);
  const double mu = v.mean().item<double>();
  const double fourth = (v - mu).pow(4).mean().item<double>();
  const double sd = v.std(/*unbiased=*/true).item<double>();  // NaN for one value
  return {v.abs().max().item<double>(), fourth / (sd * sd * sd * sd + kKurtosisEps)};
}

}  // namespace attnlab
