// The figures the source papers report (docs/spec.md names them), as data for
// `attnlab report --compare-paper`. Losses and differences in nats on FineWeb-Edu.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace attnlab {

/// A reported number, or a range the paper gives instead of one (low < high).
struct PaperFigure {
  double low = 0.0;
  double high = 0.0;
  std::string note;  ///< e.g. another value the paper also quotes; empty when none
  bool is_range() const { return low != high; }
};

/// The paper's tiers, in order: 10m, 50m, 124m, 350m.
const std::vector<std::string>& paper_tiers();

/// The paper's mean paired difference for a contrast id of spec_contrasts() (report.h) at `tier`;
/// std::nullopt where the paper reports none.
std::optional<PaperFigure> paper_difference(const std::string& contrast_id, const std::string& tier);

/// The paper's final validation loss of `arm` at `tier` (it reports the best arm, combo2, only).
std::optional<PaperFigure> paper_val_loss(const std::string& arm, const std::string& tier);

/// The paper's best arm (lowest validation loss) at `tier`, if it names one.
std::optional<std::string> paper_best_arm(const std::string& tier);

}  // namespace attnlab

namespace attnlab {

/// paper_figures.md's "Trained-model measurements" table and exposure sentence (paper 000), at the
/// paper's scale (124m, 350m): shares as fractions (6.0% -> 0.060); empty where not reported.
struct PaperProbeRow {
  std::string scale, arm;
  std::optional<double> first_key_mass, read_norm_ratio, phantom_mass, exposure;
};
const std::vector<PaperProbeRow>& paper_probe_rows();

/// One junk-injection figure of paper_figures.md: the loss increase (nats) of `arm` at `eps`, or a
/// range (low < high) where the paper gives one. cutoff "median" | "p25" | "" (not stated).
struct PaperInjection {
  std::string scale, arm, kind, cutoff;
  double eps = 0.0;
  PaperFigure increase;
};
const std::vector<PaperInjection>& paper_injections();

}  // namespace attnlab
