// The report's probe and injection tables (paper 000's trained-model and junk-injection figures):
// one value per run, summarised per arm over seeds as mean ± sd (n).
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <sstream>

#include "attnlab/arm.h"
#include "attnlab/paired_stats.h"
#include "attnlab/paper_figures.h"
#include "attnlab/probe_measures.h"
#include "attnlab/probe_report.h"

namespace attnlab {
namespace {

using Runs = std::vector<const ProbeReportRun*>;

// Runs by "tier" or "tier (variant)", each group's arms in SPEC section 1's order.
std::map<std::string, std::map<std::string, Runs>> by_group_and_arm(const ProbeReport& results) {
  std::map<std::string, std::map<std::string, Runs>> out;
  for (const auto& r : results.runs) out[r.tier + (r.variant.empty() ? "" : " (" + r.variant + ")")][r.arm].push_back(&r);
  return out;
}

std::vector<std::string> arm_order(const std::map<std::string, Runs>& arms) {
  std::vector<std::string> out;
  for (const auto& a : all_arms())
    if (arms.count(a.name)) out.push_back(a.name);
  for (const auto& [name, _] : arms)
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  return out;
}

// "2.07% ± 0.09%", "0.955 ± 0.037", "+0.0161 ± 0.0157" (signed); "-" for no value.
std::string stat_cell(const std::vector<double>& values, bool percent, int digits = 3, bool signed_value = false) {
  const auto s = summarize(values);
  if (s.n == 0) return "-";
  const double k = percent ? 100.0 : 1.0;
  if (percent) digits = 2;
  const std::string unit = percent ? "%" : "";
  std::string cell = fmt::format(fmt::runtime(signed_value ? "{:+.{}f}" : "{:.{}f}"), k * s.mean, digits) + unit;
  if (s.sd) cell += fmt::format(" ± {:.{}f}", k * *s.sd, digits) + unit;
  return cell;
}

std::string opt_cell(const std::optional<double>& v, bool percent) {
  if (!v) return "";
  return percent ? fmt::format("{:.1f}%", 100 * *v) : fmt::format("{:.2f}", *v);
}

// Model-level value of `measure` over the arm's runs that have one as the report reads it
// (report_probe_value). Throws for an unknown measure.
std::vector<double> model_values(const Runs& runs, const std::string& measure) {
  std::vector<double> out;
  for (const auto* r : runs)
    if (const auto v = report_probe_value(*r, measure)) out.push_back(*v);
  return out;
}

// The value of `measure` over the local (or global) layers of the arm's windowed runs (docs/windows.md).
std::vector<double> type_values(const Runs& runs, const std::string& measure, bool local) {
  const size_t i = probe_measure_index(measure);
  std::vector<double> out;
  for (const auto* r : runs) {
    if (!r->probe) continue;
    const auto& means = local ? r->probe->summary.local : r->probe->summary.global;
    if (!means) continue;
    const auto& v = means->values[i];
    if (v && std::isfinite(*v)) out.push_back(*v);
  }
  return out;
}

// Whether any run of the group was probed as a windowed model (its layers carry types).
bool any_windowed(const std::map<std::string, Runs>& arms) {
  for (const auto& [_, runs] : arms)
    for (const auto* r : runs)
      if (r->probe && !r->probe->summary.layers.empty() && r->probe->summary.layers[0].local) return true;
  return false;
}

// The measures a windowed group shows per layer type, beside the model means.
const std::vector<std::string>& by_type_measures() {
  static const std::vector<std::string> names = {"first_key_mass", "first_key_chance", "oldest_key_mass", "exposure"};
  return names;
}

// The massive-activation ratio of the arm's runs whose probe has a finite one.
std::vector<double> sink_state_ratios(const Runs& runs) {
  std::vector<double> out;
  for (const auto* r : runs)
    if (r->probe && r->probe->sink_state && std::isfinite(r->probe->sink_state->max_ratio))
      out.push_back(r->probe->sink_state->max_ratio);
  return out;
}

// The paper's figure for `measure` in one of its rows; none where it reports none.
std::optional<double> paper_value(const PaperProbeRow& p, const std::string& measure) {
  if (measure == "first_key_mass") return p.first_key_mass;
  if (measure == "read_norm_ratio") return p.read_norm_ratio;
  if (measure == "phantom_mass") return p.phantom_mass;
  if (measure == "exposure") return p.exposure;
  return std::nullopt;
}

// One column per measure of probe_measure_table() that tables show, in its order.
// A windowed group also shows first-key mass, oldest-key mass and exposure over its local and its
// global layers (docs/windows.md, "Probes under a window").
void probe_table(std::ostream& out, const std::map<std::string, Runs>& arms, bool compare_paper) {
  const bool windowed = any_windowed(arms);
  std::vector<const ProbeMeasure*> cols;
  for (const auto& m : probe_measure_table())
    if (m.in_tables && m.listed(windowed)) cols.push_back(&m);
  const size_t typed = windowed ? 2 * by_type_measures().size() : 0;
  out << "| arm |";
  for (const auto* m : cols) out << " " << m->label << " |";
  if (windowed)
    for (const auto& name : by_type_measures())
      out << " " << probe_measure(name).label << ", local | " << probe_measure(name).label << ", global |";
  out << " sink-state max / median | n |\n|---|";
  for (size_t i = 0; i <= cols.size() + typed + 1; ++i) out << "---:|";
  out << "\n";
  for (const auto& arm : arm_order(arms)) {
    out << "| " << arm << " |";
    for (const auto* m : cols) out << " " << stat_cell(model_values(arms.at(arm), m->name), m->percent) << " |";
    if (windowed)
      for (const auto& name : by_type_measures())
        for (bool local : {true, false})
          out << " " << stat_cell(type_values(arms.at(arm), name, local), probe_measure(name).percent) << " |";
    out << " " << stat_cell(sink_state_ratios(arms.at(arm)), false, 1) << " |";
    out << " " << model_values(arms.at(arm), "exposure").size() << " |\n";
  }
  if (!compare_paper) return;
  for (const auto& p : paper_probe_rows()) {
    out << "| *paper, " << p.scale << " scale:* " << p.arm << " |";
    for (const auto* m : cols) {
      const auto v = paper_value(p, m->name);
      out << (v ? " " + opt_cell(v, m->percent) + " |" : " |");
    }
    for (size_t i = 0; i < typed; ++i) out << " |";
    out << " | |\n";
  }
}

// Increases of one (kind, cutoff) at each eps, and the clean losses, over an arm's runs.
struct DoseValues {
  std::vector<double> clean;
  std::map<double, std::vector<double>> increase;
};

DoseValues dose_values(const Runs& runs, const std::string& kind, const std::string& cutoff) {
  DoseValues v;
  for (const auto* r : runs)
    for (const auto& inj : r->inject) {
      if (to_string(inj.options.kind) != kind || to_string(inj.options.cutoff) != cutoff) continue;
      v.clean.push_back(inj.result.clean_loss);
      for (const auto& d : inj.result.doses) v.increase[d.eps].push_back(d.increase);
    }
  return v;
}

void paper_dose_rows(std::ostream& out, const std::string& kind, const std::string& cutoff, const std::vector<double>& eps) {
  std::map<std::string, std::map<double, const PaperInjection*>> rows;  // "scale: arm (note)" -> eps -> figure
  for (const auto& p : paper_injections()) {
    const bool kind_ok = p.kind == kind || (p.kind.empty() && kind == "structured");
    if (!kind_ok || !(p.cutoff == cutoff || p.cutoff.empty())) continue;
    std::string label = "*paper, " + p.scale + " scale:* " + p.arm;
    if (p.kind.empty()) label += " (kind and cutoff not stated)";
    else if (p.cutoff.empty()) label += " (cutoff not stated)";
    rows[label][p.eps] = &p;
  }
  for (const auto& [label, figures] : rows) {
    out << "| " << label << " | |";
    for (double e : eps) {
      const auto it = figures.find(e);
      if (it == figures.end()) out << " |";
      else if (it->second->increase.is_range()) out << fmt::format(" +{:.3f} to +{:.3f} |", it->second->increase.low, it->second->increase.high);
      else out << fmt::format(" {:+.3f} |", it->second->increase.low);
    }
    out << " |\n";
  }
}

void dose_table(std::ostream& out, const std::map<std::string, Runs>& arms, const std::string& kind,
                const std::string& cutoff, const std::vector<double>& eps, bool compare_paper) {
  std::ostringstream rows;
  for (const auto& arm : arm_order(arms)) {
    const auto v = dose_values(arms.at(arm), kind, cutoff);
    if (v.clean.empty()) continue;
    rows << "| " << arm << " | " << stat_cell(v.clean, false, 4) << " |";
    for (double e : eps) rows << " " << (v.increase.count(e) ? stat_cell(v.increase.at(e), false, 4, true) : "-") << " |";
    rows << " " << v.clean.size() << " |\n";
  }
  if (rows.str().empty()) return;
  out << "#### " << kind << " junk, reads below the " << (cutoff == "p25" ? "25th percentile" : "median") << "\n\n| arm | clean loss |";
  for (double e : eps) out << " eps " << e << " |";
  out << " n |\n|---|---:|";
  for (size_t i = 0; i < eps.size(); ++i) out << "---:|";
  out << "---:|\n" << rows.str();
  if (compare_paper) paper_dose_rows(out, kind, cutoff, eps);
  out << "\n";
}

}  // namespace

std::string probe_tables_markdown(const ProbeReport& results, bool compare_paper) {
  std::ostringstream out;
  const auto& eps = results.eps;
  for (const auto& [group, arms] : by_group_and_arm(results)) {
    bool any_probe = false, any_inject = false;
    for (const auto& [_, runs] : arms)
      for (const auto* r : runs) any_probe |= r->probe.has_value(), any_inject |= !r->inject.empty();
    if (any_probe) {
      out << "## Trained-model measurements, tier " << group << " (mean ± sd over seeds; model = mean over every "
          << "layer and head; first key = position 0, sink_token's learned token)\n\n";
      probe_table(out, arms, compare_paper);
      out << "\nsink-state max / median: the massive-activation ratio, the largest over residual layers of max_c |x_c| "
             "/ median_c |x_c| at position 0 of the first probe sequence (docs/activations.md).";
      if (any_windowed(arms))
        out << " Under a window the first-key masses, their chances, the sink score and the sink rate average the "
               "queries that see key 0, which are a local layer's first W - 1 and a global layer's every query: a "
               "model with both types has no model-level value of them (-), only the local and global columns.";
      out << "\n\n";
    }
    if (any_inject) {
      out << "## Junk injection, tier " << group << ": validation-loss increase over clean (nats; mean ± sd over seeds)\n\n";
      for (const char* cutoff : {"p25", "median"})
        for (const char* kind : {"structured", "gaussian", "gate_direction"}) dose_table(out, arms, kind, cutoff, eps, compare_paper);
    }
  }
  for (const auto& r : results.runs)
    if (r.error) out << "- " << r.name << ": not probed (" << *r.error << ")\n";
  return out.str();
}

}  // namespace attnlab
