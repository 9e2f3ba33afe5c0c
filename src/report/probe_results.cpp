// Running (or reusing) probe and injection results for every finished run of a sweep.
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "attnlab/arm.h"
#include "attnlab/probe_measures.h"
#include "attnlab/probe_report.h"
#include "attnlab/progress.h"
#include "attnlab/run_dir.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// The injections the report tabulates for one arm: both cutoffs, structured and gaussian junk, and
// the gate's own direction where the arm has a projection gate.
std::vector<InjectOptions> report_injections(const std::string& arm, const ProbeReportOptions& o) {
  std::vector<JunkKind> kinds = {JunkKind::structured, JunkKind::gaussian};
  if (arm_by_name(arm).gate == GateKind::projection) kinds.push_back(JunkKind::gate_direction);
  std::vector<InjectOptions> out;
  for (auto cutoff : {QuietCutoff::median, QuietCutoff::p25})
    for (auto kind : kinds) {
      InjectOptions io;
      io.kind = kind;
      io.cutoff = cutoff;
      io.eps = o.eps;
      io.seed = o.seed;
      out.push_back(io);
    }
  return out;
}

ProbeReportRun run_entry(const SweepReport& report, const RunRecord& run, const ProbeReportOptions& o) {
  ProbeReportRun entry{run.name, run.tier, run.variant, run.arm, run.seed, std::nullopt, {}, std::nullopt};
  const RunDir dir(report.sweep_dir / run.name);
  const ProbeSource source{dir.path(), o.data_pattern, o.device};
  int reused = 0, computed = 0;
  try {
    bool hit = false;
    if (o.probes) {
      entry.probe = cached_probe(source, o.data, dir.probes_path(), &hit);
      (hit ? reused : computed)++;
    }
    if (o.inject)
      for (const auto& io : report_injections(run.arm, o)) {
        entry.inject.push_back(cached_inject(source, o.data, io, dir.probes_path(), &hit));
        (hit ? reused : computed)++;
      }
  } catch (const std::exception& e) {
    entry.error = e.what();
    spdlog::warn("probes of {}: {}", run.name, e.what());
  }
  spdlog::info("probes of {}: {} computed, {} reused from {}", run.name, computed, reused, dir.probes_path().string());
  return entry;
}

}  // namespace

ProbeReport collect_probe_results(const SweepReport& report, const ProbeReportOptions& o) {
  ProbeReport out{{}, o.eps, o.seed};
  if (o.progress)
    for (const auto& run : report.runs) o.progress->add_total(run.finished() ? 1 : 0);
  for (const auto& run : report.runs)
    if (run.finished()) {
      out.runs.push_back(run_entry(report, run, o));
      if (o.progress) o.progress->advance();
    }
  return out;
}

nlohmann::json to_json(const ProbeReport& results) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : results.runs) {
    nlohmann::json inject = nlohmann::json::array();
    for (const auto& i : r.inject) inject.push_back(to_json(i));
    nlohmann::json entry = {{"name", r.name}, {"tier", r.tier},
                            {"variant", r.variant}, {"arm", r.arm},
                            {"seed", r.seed}, {"probe", r.probe ? to_json(*r.probe) : nlohmann::json()},
                            {"inject", inject}};
    if (r.error) entry["error"] = *r.error;
    runs.push_back(entry);
  }
  // The orders the plot script draws in: arms as the registry lists them, measures as the table.
  nlohmann::json arm_order = nlohmann::json::array(), measures = nlohmann::json::array();
  for (const auto& arm : all_arms()) arm_order.push_back(arm.name);
  for (const auto& m : probe_measure_table())
    measures.push_back({{"name", m.name}, {"label", m.label}, {"percent", m.percent}});
  return {{"runs", runs}, {"eps", results.eps}, {"seed", results.seed}, {"arm_order", arm_order}, {"measures", measures}};
}

std::map<std::string, std::string> probe_report_files(const ProbeReport& results, bool compare_paper) {
  const auto md = probe_tables_markdown(results, compare_paper) + probe_pairs_markdown(pair_probe_results(results));
  return {{"probes.md", md}, {"probes.json", to_json(results).dump(1) + "\n"}};
}

}  // namespace attnlab
