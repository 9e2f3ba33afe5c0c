// Outlier statistics of a block's output (Bondarenko et al. 2023, "Quantizable Transformers:
// Removing Outliers by Helping Attention Heads Do Nothing", arXiv 2306.12929: its tables' "max inf.
// norm" and "avg. kurtosis", as the authors' validate_clm.py computes them): per sequence, over all
// T x d values x of the block's output, the infinity norm and the kurtosis. A quantiser's range is
// set by the first; the second says how heavy the tails are (3 for a Gaussian). docs/probes.md,
// "Outlier statistics".
#pragma once

#include <ATen/core/Tensor.h>

namespace attnlab {

/// Added to std^4 in the kurtosis' denominator, as the authors' code does (a constant tensor: 0, not NaN).
inline constexpr double kKurtosisEps = 1e-6;

/// One sequence's outlier statistics, float64.
struct OutlierStats {
  double inf_norm = 0.0;  ///< max |x|
  /// mean((x - mu)^4) / (std^4 + kKurtosisEps), mu the mean and std the unbiased (n - 1) standard
  /// deviation of the n values: plain kurtosis (about 3 for Gaussian values), not excess kurtosis.
  /// NaN for n = 1 (no unbiased std).
  double kurtosis = 0.0;
};

/// The statistics of every value of `x` (one sequence's block output, [T, d]; any shape and float
/// dtype, flattened), computed in float64. Throws std::invalid_argument for an empty or undefined tensor.
OutlierStats outlier_stats(const at::Tensor& x);

}  // namespace attnlab
