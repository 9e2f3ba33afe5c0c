// `attnlab report <sweep dir> --wd` (SPEC section 5 "weight-decay sweep", paper 003): when
// and how high the largest activation peaks as a function of the weight-decay coefficient lambda.
//
// Per run, from its metrics.jsonl {"type": "activations"} records (config track.activations.every):
// m(t) = max over layers l = 0..n_layer of the peak state's max |x_c| at tracked step t. The peak is
// the first step of the largest m(t). A run whose largest m(t) is at the last tracked step (still
// growing) or at the first (never grew) has "no peak within the window" and enters no fit. lambda = 0
// can have a peak, but ln(0) is undefined, so it is reported and left out of the fits too, as is a
// run that has not finished (its window is not the sweep's).
//
// Fits, per (tier, arm, variant without optim.weight_decay), over runs with a peak and lambda > 0,
// ordinary least squares with x = ln(lambda):
//   t_peak = a - b ln(lambda)       (a, b, and Pearson's r between ln(lambda) and t_peak)
//   ln(peak) = ln(C) + p ln(lambda) (p with its standard error sqrt(SSR / (n - 2) / Sxx), n >= 3)
// The paper finds p near -1/2.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnlab {

/// y = intercept + slope x by ordinary least squares.
struct LineFit {
  size_t n = 0;
  double intercept = 0.0, slope = 0.0;
  double r = 0.0;                  ///< Pearson correlation of x and y (NaN when y is constant)
  std::optional<double> slope_se;  ///< sqrt(SSR / (n - 2) / Sxx); none for n < 3
};

/// Throws std::invalid_argument when the sizes differ, n < 2, or every x is equal.
LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y);

/// t_peak = a - b ln(lambda): a = intercept, b = -slope of fit_line(ln lambda, t_peak).
struct PeakStepFit {
  size_t n = 0;
  double a = 0.0, b = 0.0, r = 0.0;
};
/// peak = C lambda^p: p = slope of fit_line(ln lambda, ln peak).
struct PeakSizeFit {
  size_t n = 0;
  double p = 0.0, log_c = 0.0;
  std::optional<double> p_se;
};

/// Both fits from (lambda > 0, t_peak in steps, peak > 0); throws as fit_line, and
/// std::invalid_argument for lambda <= 0 or peak <= 0.
PeakStepFit fit_peak_step(const std::vector<double>& lambda, const std::vector<double>& t_peak);
PeakSizeFit fit_peak_size(const std::vector<double>& lambda, const std::vector<double>& peak);

/// One tracked step of a run: m(t) as defined at the top.
struct MaxPoint {
  int64_t step = 0;
  double max_abs = 0.0;
  int64_t layer = 0;  ///< where the largest |x_c| was
};

struct WdRun {
  std::string name;  ///< relative to the sweep directory
  std::string tier, arm, variant, group;  ///< group: tier/arm/variant without the weight-decay level
  uint64_t seed = 0;
  double lambda = 0.0;
  std::vector<MaxPoint> curve;       ///< ascending step
  std::optional<MaxPoint> peak;      ///< none: no peak within the window
  std::string note;                  ///< why there is no peak, or why the run is not fitted
  bool finished = true;              ///< final.json written; an unfinished run is never fitted
  bool fitted = false;               ///< entered its group's fits
};

struct WdGroup {
  std::string group;
  std::optional<PeakStepFit> step_fit;
  std::optional<PeakSizeFit> size_fit;
  std::string note;  ///< why a fit is missing (fewer than two distinct lambdas with a peak)
};

struct WdReport {
  std::vector<WdRun> runs;
  std::vector<WdGroup> groups;
};

/// m(t) from the {"type": "activations"} lines of one metrics.jsonl (other lines are skipped).
/// Throws std::runtime_error naming the file when it cannot be read.
std::vector<MaxPoint> max_activation_curve(const std::filesystem::path& metrics_jsonl);

/// The peak as defined at the top (note says why there is none).
std::optional<MaxPoint> find_peak(const std::vector<MaxPoint>& curve, std::string* note = nullptr);

/// Every run of the sweep (collect_runs), its lambda from its config.yaml, its curve, peak and the
/// fits. Throws std::runtime_error as collect_runs, and naming a run whose config.yaml is unreadable.
WdReport build_wd_report(const std::filesystem::path& sweep_dir);

/// {"kind": "weight_decay", "runs": [...], "groups": [...]} for tools/plot_activations.py.
nlohmann::json wd_json(const WdReport& report);
/// "wd_runs.csv" and "wd_fits.csv".
std::map<std::string, std::string> wd_csv(const WdReport& report);
/// Two Markdown tables: the runs, then the fits.
std::string wd_markdown(const WdReport& report);
/// Every file of `attnlab report --wd` by name: wd_csv(), "wd.md" (wd_markdown()) and "wd.json"
/// (wd_json(), indented by one space, newline-terminated).
std::map<std::string, std::string> wd_files(const WdReport& report);

}  // namespace attnlab
