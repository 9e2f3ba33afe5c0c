// Number formats shared by the report's renderings: 4 decimals, as paper_figures.md writes them.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "attnlab/report.h"

namespace attnlab::report_format {

inline std::string loss(double v) { return fmt::format("{:.4f}", v); }
inline std::string diff(double v) { return fmt::format("{:+.4f}", v); }
inline std::string sd(const SampleStats& s) { return s.sd ? fmt::format("{:.4f}", *s.sd) : "n/a"; }
inline std::string same_sign(const SampleStats& s) { return fmt::format("{}/{}", s.same_sign, s.n); }

/// "+0.0185", "+0.0000 (also quoted as -0.0008)", or "0.0024 to 0.0076" for a range.
inline std::string paper(const PaperFigure& p, bool signed_value = true) {
  if (p.is_range()) return fmt::format("{:.4f} to {:.4f}", p.low, p.high);
  return (signed_value ? diff(p.low) : loss(p.low)) + (p.note.empty() ? "" : " (" + p.note + ")");
}

/// A p-value: "0.653", "0.002", or "4.1e-05" below 0.001.
inline std::string p_value(double p) { return p >= 0.001 ? fmt::format("{:.3f}", p) : fmt::format("{:.1e}", p); }

/// An exact test's p-value: "n/a" for none (fewer than 3 non-zero differences, paired_stats.h),
/// "0.250 (floor)" when it is the smallest p the test can give with these values, "0.003 (normal)"
/// for the Wilcoxon normal approximation.
inline std::string exact_p(std::optional<double> p, std::optional<double> floor, bool exact = true) {
  if (!p) return "n/a";
  if (!exact) return p_value(*p) + " (normal)";
  const bool at_floor = floor && *p <= *floor * (1 + 1e-9);
  return p_value(*p) + (at_floor ? " (floor)" : "");
}

/// The test columns of a difference: the paired t 95% interval, p-value, its Holm adjustment, the
/// sign-flip and Wilcoxon p-values, seeds needed for the interval to exclude 0 and for 80% power;
/// "n/a" where a number does not exist (n < 2; p for sd = mean = 0; seeds for mean = 0; the exact
/// tests below 3 non-zero differences). paired_stats.h defines them.
struct TestCells {
  std::string interval = "n/a", p = "n/a", p_holm = "n/a", p_sign_flip = "n/a", p_wilcoxon = "n/a",
              seeds = "n/a", seeds_for_power = "n/a";
};
inline TestCells test_cells(const DifferenceResult& d) {
  TestCells c;
  const auto& tests = d.tests;
  if (const auto& t = tests.t) {
    c.interval = "[" + diff(t->ci_low) + ", " + diff(t->ci_high) + "]";
    if (t->p_value) c.p = p_value(*t->p_value);
    if (t->seeds_needed) c.seeds = std::to_string(*t->seeds_needed);
    if (t->seeds_for_power) c.seeds_for_power = std::to_string(*t->seeds_for_power);
  }
  if (d.p_holm) c.p_holm = p_value(*d.p_holm);
  if (tests.sign_flip) c.p_sign_flip = exact_p(tests.sign_flip->p_value, tests.exact_p_floor);
  if (tests.wilcoxon) c.p_wilcoxon = exact_p(tests.wilcoxon->p_value, tests.exact_p_floor, tests.wilcoxon->exact);
  return c;
}

/// "+0.0123 ± 0.0040 (2/2 seeds, p 0.046)"; "+0.0123 (1/1 seed)" for one seed; "no pairs" for none.
inline std::string difference_cell(const DifferenceResult& d) {
  const auto& s = d.stats;
  if (s.n == 0) return "no pairs";
  const std::string spread = s.sd ? " ± " + fmt::format("{:.4f}", *s.sd) : "";
  const auto& t = d.tests.t;
  const std::string p = t && t->p_value ? ", p " + p_value(*t->p_value) : "";
  return diff(s.mean) + spread + " (" + same_sign(s) + (s.n == 1 ? " seed" : " seeds") + p + ")";
}

/// The arms of `c` that have no run at all in `g` (not even an unfinished one): a difference the
/// sweep does not measure, which the renderings list once instead of as an empty row.
inline std::vector<std::string> arms_not_in(const GroupReport& g, const Contrast& c) {
  std::vector<std::string> missing;
  for (const auto& [arm, coef] : c.terms) {
    bool present = false;
    for (const auto& a : g.arms) present = present || a.arm == arm;
    if (!present && std::find(missing.begin(), missing.end(), arm) == missing.end()) missing.push_back(arm);
  }
  return missing;
}
inline bool in_sweep(const GroupReport& g, const DifferenceResult& d) { return arms_not_in(g, d.contrast).empty(); }

/// "4.1234 ± 0.0100 (n=3)".
inline std::string loss_cell(const SampleStats& s) {
  if (s.n == 0) return "no finished run";
  return loss(s.mean) + (s.sd ? " ± " + fmt::format("{:.4f}", *s.sd) : "") + fmt::format(" (n={})", s.n);
}

inline std::string seed_list(const std::vector<SeedValue>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ",") + std::to_string(v.seed);
  return out;
}

inline std::string group_title(const GroupReport& g) {
  return "tier " + g.tier + (g.variant.empty() ? "" : " (" + g.variant + ")");
}

}  // namespace attnlab::report_format
