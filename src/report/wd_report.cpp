// The weight-decay sweep's runs: curves from metrics.jsonl, peaks, groups and their fits; JSON,
// CSV and Markdown.
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnlab/report.h"
#include "attnlab/run_dir.h"
#include "attnlab/sweep.h"
#include "attnlab/wd_report.h"
#include "common/csv_table.h"
#include "common/json_number.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// tier/arm/variant without the optim.weight_decay level: runs that differ only in lambda (and seed).
std::string group_of(const RunRecord& r) {
  const std::string rest = variant_without(r.variant, "optim.weight_decay");
  return r.tier + "/" + r.arm + (rest.empty() ? "" : "/" + rest);
}

void fit_group(WdGroup& g, std::vector<WdRun>& runs) {
  std::vector<double> lambda, t_peak, peak;
  for (auto& r : runs) {
    if (r.group != g.group || !r.peak) continue;
    if (!r.finished) {
      r.note = "run not finished: not fitted";
      continue;
    }
    if (r.lambda <= 0) {
      r.note = "lambda = 0: ln(lambda) undefined, not fitted";
      continue;
    }
    r.fitted = true;
    lambda.push_back(r.lambda), t_peak.push_back(double(r.peak->step)), peak.push_back(r.peak->max_abs);
  }
  if (std::set<double>(lambda.begin(), lambda.end()).size() < 2) {
    g.note = fmt::format("no fit: {} run(s) with a peak and lambda > 0, fewer than two distinct lambdas", lambda.size());
    for (auto& r : runs)
      if (r.group == g.group) r.fitted = false;
    return;
  }
  g.step_fit = fit_peak_step(lambda, t_peak);
  g.size_fit = fit_peak_size(lambda, peak);
}


}  // namespace

std::vector<MaxPoint> max_activation_curve(const fs::path& metrics_jsonl) {
  std::vector<MaxPoint> curve;
  for (const auto& record : read_metrics(metrics_jsonl).activations) {
    MaxPoint p{record.step, -1.0, 0};
    for (const auto& layer : record.layers)
      if (layer.peak.max_abs > p.max_abs) p.max_abs = layer.peak.max_abs, p.layer = layer.layer;
    curve.push_back(p);
  }
  return curve;
}

std::optional<MaxPoint> find_peak(const std::vector<MaxPoint>& curve, std::string* note) {
  auto say = [&](const std::string& why) {
    if (note) *note = why;
    return std::nullopt;
  };
  if (curve.empty()) return say("no activation records (track.activations.every = 0?)");
  size_t best = 0;
  for (size_t i = 1; i < curve.size(); ++i)
    if (curve[i].max_abs > curve[best].max_abs) best = i;
  if (best == curve.size() - 1) return say("no peak within the window: max |x| still largest at the last tracked step");
  if (best == 0) return say("no peak within the window: max |x| largest at the first tracked step");
  return curve[best];
}

WdReport build_wd_report(const fs::path& sweep_dir) {
  WdReport report;
  std::vector<std::string> groups;
  for (const auto& rec : collect_runs(sweep_dir)) {
    WdRun r;
    r.name = rec.name, r.tier = rec.tier, r.arm = rec.arm, r.variant = rec.variant, r.seed = rec.seed;
    r.group = group_of(rec);
    r.finished = rec.finished();
    const RunDir run(sweep_dir / rec.name);
    r.lambda = run.config().optim.weight_decay;
    if (fs::exists(run.metrics_file())) r.curve = max_activation_curve(run.metrics_file());
    r.peak = find_peak(r.curve, &r.note);
    if (std::find(groups.begin(), groups.end(), r.group) == groups.end()) groups.push_back(r.group);
    report.runs.push_back(std::move(r));
  }
  for (const auto& name : groups) {
    WdGroup g;
    g.group = name;
    fit_group(g, report.runs);
    report.groups.push_back(std::move(g));
  }
  return report;
}

nlohmann::json wd_json(const WdReport& report) {
  nlohmann::json runs = nlohmann::json::array(), groups = nlohmann::json::array();
  for (const auto& r : report.runs) {
    nlohmann::json steps = nlohmann::json::array(), maxima = nlohmann::json::array();
    for (const auto& p : r.curve) steps.push_back(p.step), maxima.push_back(p.max_abs);
    runs.push_back({{"name", r.name}, {"group", r.group}, {"tier", r.tier}, {"arm", r.arm}, {"seed", r.seed},
                    {"lambda", r.lambda},
                    {"peak_step", r.peak ? nlohmann::json(r.peak->step) : nlohmann::json()},
                    {"peak", r.peak ? nlohmann::json(r.peak->max_abs) : nlohmann::json()},
                    {"peak_layer", r.peak ? nlohmann::json(r.peak->layer) : nlohmann::json()},
                    {"finished", r.finished}, {"fitted", r.fitted}, {"note", r.note},
                    {"curve", {{"step", steps}, {"max_abs", maxima}}}});
  }
  for (const auto& g : report.groups) {
    nlohmann::json j = {{"group", g.group}, {"note", g.note}, {"peak_step_fit", nullptr}, {"peak_size_fit", nullptr}};
    if (g.step_fit) j["peak_step_fit"] = {{"n", g.step_fit->n}, {"a", g.step_fit->a}, {"b", g.step_fit->b}, {"r", json_number(g.step_fit->r)}};
    if (g.size_fit)
      j["peak_size_fit"] = {{"n", g.size_fit->n}, {"p", g.size_fit->p}, {"p_se", json_number(g.size_fit->p_se)}, {"log_c", g.size_fit->log_c}};
    groups.push_back(j);
  }
  return {{"kind", "weight_decay"},
          {"definition", "m(t) = max over layers of max_c |x_c| at the peak state of the probe batch; peak = first "
                         "step of the largest m(t); t_peak = a - b ln(lambda); peak = C lambda^p"},
          {"runs", runs},
          {"groups", groups}};
}

std::map<std::string, std::string> wd_csv(const WdReport& report) {
  csv::Table runs({"run", "group", "seed", "lambda", "peak_step", "peak", "peak_layer", "fitted", "note"});
  for (const auto& r : report.runs)
    runs.row({r.name, r.group, std::to_string(r.seed), csv::number(r.lambda), r.peak ? std::to_string(r.peak->step) : "",
              r.peak ? csv::number(r.peak->max_abs) : "", r.peak ? std::to_string(r.peak->layer) : "",
              r.fitted ? "1" : "0", r.note});
  csv::Table fits({"group", "n", "a", "b", "r", "p", "p_se", "log_c", "note"});
  for (const auto& g : report.groups) {
    const auto& s = g.step_fit;
    const auto& z = g.size_fit;
    fits.row({g.group, s ? std::to_string(s->n) : "0", s ? csv::number(s->a) : "", s ? csv::number(s->b) : "",
              s ? csv::number(s->r) : "", z ? csv::number(z->p) : "", z && z->p_se ? csv::number(*z->p_se) : "",
              z ? csv::number(z->log_c) : "", g.note});
  }
  return {{"wd_runs.csv", runs.str()}, {"wd_fits.csv", fits.str()}};
}

std::string wd_markdown(const WdReport& report) {
  std::ostringstream out;
  out << "## Weight decay: peak of max |x| (SPEC section 5)\n\n"
         "| run | lambda | peak step | peak max abs | layer | fitted | note |\n|---|---|---|---|---|---|---|\n";
  for (const auto& r : report.runs)
    out << fmt::format("| {} | {:g} | {} | {} | {} | {} | {} |\n", r.name, r.lambda,
                       r.peak ? std::to_string(r.peak->step) : "-", r.peak ? fmt::format("{:.4g}", r.peak->max_abs) : "-",
                       r.peak ? std::to_string(r.peak->layer) : "-", r.fitted ? "yes" : "no", r.note);
  out << "\n| group | n | t_peak = a - b ln(lambda): a | b | r | peak ~ lambda^p: p | se(p) | note |\n"
         "|---|---|---|---|---|---|---|---|\n";
  for (const auto& g : report.groups) {
    const auto& s = g.step_fit;
    const auto& z = g.size_fit;
    out << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", g.group, s ? s->n : 0,
                       s ? fmt::format("{:.4g}", s->a) : "-", s ? fmt::format("{:.4g}", s->b) : "-",
                       s ? fmt::format("{:.3f}", s->r) : "-", z ? fmt::format("{:.3f}", z->p) : "-",
                       z && z->p_se ? fmt::format("{:.3f}", *z->p_se) : "-", g.note);
  }
  return out.str();
}

std::map<std::string, std::string> wd_files(const WdReport& report) {
  auto files = wd_csv(report);
  files["wd.md"] = wd_markdown(report);
  files["wd.json"] = wd_json(report).dump(1) + "\n";
  return files;
}

}  // namespace attnlab
