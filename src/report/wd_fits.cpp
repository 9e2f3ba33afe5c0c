// Least-squares fits of the weight-decay sweep (SPEC section 5): t_peak against ln(lambda) and
// ln(peak) against ln(lambda), in float64 with centred sums.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "attnlab/wd_report.h"

namespace attnlab {

LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2)
    throw std::invalid_argument("fit: needs at least two (x, y) points of equal count, got " +
                                std::to_string(x.size()) + " and " + std::to_string(y.size()));
  const double n = double(x.size());
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += x[i] / n, my += y[i] / n;
  double sxx = 0, syy = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx == 0) throw std::invalid_argument("fit: every x is equal (one lambda only)");
  LineFit f;
  f.n = x.size();
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  f.r = syy > 0 ? sxy / std::sqrt(sxx * syy) : std::numeric_limits<double>::quiet_NaN();
  if (f.n >= 3) {
    double ssr = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = y[i] - f.intercept - f.slope * x[i];
      ssr += e * e;
    }
    f.slope_se = std::sqrt(ssr / (n - 2) / sxx);
  }
  return f;
}

namespace {

std::vector<double> logs(const std::vector<double>& v, const char* what) {
  std::vector<double> out;
  for (double value : v) {
    if (!(value > 0)) throw std::invalid_argument(std::string("fit: ") + what + " must be > 0, got " + std::to_string(value));
    out.push_back(std::log(value));
  }
  return out;
}

}  // namespace

PeakStepFit fit_peak_step(const std::vector<double>& lambda, const std::vector<double>& t_peak) {
  const auto f = fit_line(logs(lambda, "lambda"), t_peak);
  return {f.n, f.intercept, -f.slope, f.r};
}

PeakSizeFit fit_peak_size(const std::vector<double>& lambda, const std::vector<double>& peak) {
  const auto f = fit_line(logs(lambda, "lambda"), logs(peak, "peak"));
  return {f.n, f.slope, f.intercept, f.slope_se};
}

}  // namespace attnlab
