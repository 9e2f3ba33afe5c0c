// What `attnlab activations` writes and prints, formatted from the typed report.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <string>

#include "attnlab/activation_report.h"

namespace attnlab {

std::map<std::string, std::string> activations_files(const ActivationsReport& report) {
  auto files = activations_csv(report);
  files["activations.json"] = activations_json(report).dump(1) + "\n";
  return files;
}

std::string activations_summary_markdown(const ActivationsReport& report) {
  std::string out =
      "| run | layer | sink max | argmax | ratio | massive | lock-in step | rho(first ckpt) | peak max | at (seq, pos) |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& run : report.runs) {
    for (const auto& a : run.checkpoints.back().capture.layers) {
      const auto& lock = run.lock_in[a.layer];
      out += fmt::format("| {} | {} | {:.3g} | {} | {:.3g} | {} | {} | {:.3f} | {:.3g} | ({}, {}) |\n", run.dir.string(),
                         a.layer, a.sink.max_abs, a.sink.argmax, a.sink.ratio, a.sink.massive ? "yes" : "no",
                         lock ? std::to_string(*lock) : "-", run.spearman_final[a.layer].front(), a.peak.max_abs,
                         a.peak_sequence, a.peak_position);
    }
  }
  for (const auto& o : report.overlaps) {
    out += fmt::format("seeds {} and {} of {} / {}: Jaccard of top-{} sink channels per layer:", o.seed_a, o.seed_b,
                       o.tier, o.arm, report.options.top_k);
    for (double j : o.jaccard) out += fmt::format(" {:.2f}", j);
    out += "\n";
  }
  return out;
}

}  // namespace attnlab
