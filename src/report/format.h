// Number formats shared by the report's renderings: 4 decimals, as paper_figures.md writes them.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "attnlab/report.h"

namespace attnlab::report_format {

inline std::string loss(double v) { return fmt::format("{:.4f}", v); }
inline std::string diff(double v) { return fmt::format("{:+.4f}", v); }
inline std::string sd(const SampleStats& s) { return s.sd ? fmt::format("{:.4f}", *s.sd) : "-"; }
inline std::string same_sign(const SampleStats& s) { return fmt::format("{}/{}", s.same_sign, s.n); }

/// "+0.0185", "+0.0000 (also quoted as -0.0008)", or "0.0024 to 0.0076" for a range.
inline std::string paper(const PaperFigure& p, bool signed_value = true) {
  if (p.is_range()) return fmt::format("{:.4f} to {:.4f}", p.low, p.high);
  return (signed_value ? diff(p.low) : loss(p.low)) + (p.note.empty() ? "" : " (" + p.note + ")");
}

/// "+0.0123 ± 0.0040 (2/2 seeds)"; "+0.0123 (1/1 seed)" for one seed; "no pairs" for none.
inline std::string difference_cell(const SampleStats& s) {
  if (s.n == 0) return "no pairs";
  const std::string spread = s.sd ? " ± " + fmt::format("{:.4f}", *s.sd) : "";
  return diff(s.mean) + spread + " (" + same_sign(s) + (s.n == 1 ? " seed)" : " seeds)");
}

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
