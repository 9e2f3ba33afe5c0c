// Seed overlaps across runs, and the report as JSON and CSV.
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/csv_table.h"
#include "attnlab/activation_report.h"
#include "attnlab/progress.h"
#include "attnlab/run_dir.h"
#include "common/json_number.h"

namespace attnlab {
namespace {


SeedOverlap overlap(const RunActivations& a, const RunActivations& b, int64_t top_k) {
  SeedOverlap o{a.tier, a.arm, a.seed, b.seed, {}};
  const auto& la = a.checkpoints.back().capture.layers;
  const auto& lb = b.checkpoints.back().capture.layers;
  for (size_t l = 0; l < std::min(la.size(), lb.size()); ++l)
    o.jaccard.push_back(jaccard(top_channels(la[l].sink_abs, top_k), top_channels(lb[l].sink_abs, top_k)));
  return o;
}

// The heatmap (step x channel |x_c| at the sink state, one layer) and the tokens x channels map.
nlohmann::json maps_json(const RunActivations& run) {
  nlohmann::json steps = nlohmann::json::array(), rows = nlohmann::json::array();
  for (const auto& c : run.checkpoints) {
    steps.push_back(c.step);
    rows.push_back(c.capture.layers[run.layer].sink_abs);
  }
  const auto& tokens = run.final_tokens;
  nlohmann::json token_rows = nlohmann::json::array();
  for (int64_t t = 0; t < tokens.tokens_abs.size(0); ++t) {
    const auto row = tokens.tokens_abs[t].contiguous();
    token_rows.push_back(std::vector<double>(row.data_ptr<double>(), row.data_ptr<double>() + row.numel()));
  }
  return {{"layer", run.layer},
          {"sink_heatmap", {{"steps", steps}, {"abs", rows}}},
          {"tokens", {{"sequence", tokens.tokens_sequence}, {"abs", token_rows}}}};
}

nlohmann::json run_json(const RunActivations& run) {
  nlohmann::json checkpoints = nlohmann::json::array();
  for (const auto& c : run.checkpoints) checkpoints.push_back({{"step", c.step}, {"layers", layers_json(c.capture)}});
  nlohmann::json lock_in = nlohmann::json::array(), rho = nlohmann::json::array();
  for (size_t l = 0; l < run.lock_in.size(); ++l) {
    lock_in.push_back(run.lock_in[l] ? nlohmann::json(*run.lock_in[l]) : nlohmann::json());
    nlohmann::json per_ckpt = nlohmann::json::array();
    for (double r : run.spearman_final[l]) per_ckpt.push_back(json_number(r));
    rho.push_back(per_ckpt);
  }
  return {{"dir", run.dir.string()}, {"tier", run.tier},         {"arm", run.arm},
          {"seed", run.seed},        {"weight_decay", run.weight_decay},
          {"checkpoints", checkpoints}, {"lock_in_step", lock_in}, {"spearman_final", rho},
          {"maps", maps_json(run)}};
}

std::vector<std::string> stats_cells(const RunActivations& run, int64_t step, int64_t layer, const char* state,
                                     const ActivationStats& s, int64_t sequence, int64_t position) {
  std::vector<std::string> cells = {run.dir.string(), run.arm, std::to_string(run.seed), std::to_string(step),
                                    std::to_string(layer), state, std::to_string(sequence), std::to_string(position),
                                    csv::number(s.max_abs), std::to_string(s.argmax), csv::number(s.median_abs),
                                    csv::number(s.ratio), csv::number(s.rms), csv::number(s.top3_share),
                                    s.massive ? "1" : "0"};
  std::string top;
  for (const auto& cv : s.top) top += (top.empty() ? "" : " ") + std::to_string(cv.channel) + ":" + csv::number(cv.value);
  cells.push_back(top);
  return cells;
}

}  // namespace

ActivationsReport activations_report(const std::vector<std::filesystem::path>& run_dirs,
                                     const ActivationScanOptions& options) {
  if (run_dirs.empty()) throw std::invalid_argument("activations: no run directories given");
  ActivationsReport report;
  report.options = options;
  if (options.progress)
    for (const auto& dir : run_dirs) options.progress->add_total(int64_t(RunDir(dir).checkpoints().size()));
  for (const auto& dir : run_dirs) report.runs.push_back(scan_run(dir, options));
  for (size_t i = 0; i < report.runs.size(); ++i)
    for (size_t j = i + 1; j < report.runs.size(); ++j) {
      const auto &a = report.runs[i], &b = report.runs[j];
      if (a.tier == b.tier && a.arm == b.arm && a.seed != b.seed) report.overlaps.push_back(overlap(a, b, options.top_k));
    }
  return report;
}

nlohmann::json activations_json(const ActivationsReport& report) {
  nlohmann::json runs = nlohmann::json::array(), overlaps = nlohmann::json::array();
  for (const auto& run : report.runs) runs.push_back(run_json(run));
  for (const auto& o : report.overlaps)
    overlaps.push_back({{"tier", o.tier}, {"arm", o.arm}, {"seeds", {o.seed_a, o.seed_b}}, {"jaccard", o.jaccard}});
  const auto& opt = report.options;
  return {{"layer_convention", kLayerConvention},
          {"sink_state", "position 0 of probe sequence 0 (the learned token for sink_token)"},
          {"probe_sequences", opt.sequences},
          {"top_k", opt.top_k},
          {"massive", {{"min_max", opt.massive.min_max}, {"min_ratio", opt.massive.min_ratio}}},
          {"spearman", "average ranks for ties"},
          {"runs", runs},
          {"seed_overlap", overlaps}};
}

std::map<std::string, std::string> activations_csv(const ActivationsReport& report) {
  csv::Table stats({"run", "arm", "seed", "step", "layer", "state", "sequence", "position", "max_abs", "argmax",
                    "median_abs", "ratio", "rms", "top3_share", "massive", "top"});
  csv::Table lock_in({"run", "arm", "seed", "layer", "lock_in_step", "final_argmax"});
  csv::Table rho({"run", "arm", "seed", "step", "layer", "spearman_final"});
  for (const auto& run : report.runs) {
    for (size_t k = 0; k < run.checkpoints.size(); ++k) {
      const auto& c = run.checkpoints[k];
      for (const auto& a : c.capture.layers) {
        stats.row(stats_cells(run, c.step, a.layer, "sink", a.sink, 0, 0));
        stats.row(stats_cells(run, c.step, a.layer, "peak", a.peak, a.peak_sequence, a.peak_position));
        rho.row({run.dir.string(), run.arm, std::to_string(run.seed), std::to_string(c.step), std::to_string(a.layer),
                 csv::number(run.spearman_final[a.layer][k])});
      }
    }
    for (size_t l = 0; l < run.lock_in.size(); ++l)
      lock_in.row({run.dir.string(), run.arm, std::to_string(run.seed), std::to_string(l),
                   run.lock_in[l] ? std::to_string(*run.lock_in[l]) : "",
                   std::to_string(run.checkpoints.back().capture.layers[l].sink.argmax)});
  }
  csv::Table overlap({"tier", "arm", "seed_a", "seed_b", "layer", "jaccard"});
  for (const auto& o : report.overlaps)
    for (size_t l = 0; l < o.jaccard.size(); ++l)
      overlap.row({o.tier, o.arm, std::to_string(o.seed_a), std::to_string(o.seed_b), std::to_string(l),
                   csv::number(o.jaccard[l])});
  return {{"activations.csv", stats.str()}, {"lock_in.csv", lock_in.str()},
          {"spearman.csv", rho.str()}, {"seed_overlap.csv", overlap.str()}};
}

}  // namespace attnlab
