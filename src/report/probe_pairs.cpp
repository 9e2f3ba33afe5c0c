// The probe figures paired seed for seed, as the losses are (SPEC section 3's protocol applied to
// section 4's measures): within each tier and variant, m(arm) - m(baseline) at every seed where both
// runs were probed, with the paired tests, Holm over each measure's rows, and the noise floor of that
// measure from the group's null twins (m(twin) - m(original), same arm and seed). A variant in a tier
// with plain runs (a grid list's) is also paired arm for arm against them, on their floor.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "attnlab/arm.h"
#include "attnlab/paired_stats.h"
#include "attnlab/probe_measures.h"
#include "attnlab/probe_report.h"
#include "attnlab/sweep.h"

namespace attnlab {
namespace {

// A probe run's model-level value of `measure`: a row of probe_measure_table(), or sink_state
// (the massive-activation ratio at position 0); none where the run lacks it or it is not finite.
std::optional<double> probe_value(const ProbeReportRun& run, const std::string& measure) {
  if (!run.probe) return std::nullopt;
  if (measure == kSinkStateMeasure) {
    const auto& s = run.probe->sink_state;
    return s && std::isfinite(s->max_ratio) ? std::optional<double>(s->max_ratio) : std::nullopt;
  }
  const auto& v = run.probe->summary.model.values[probe_measure_index(measure)];
  return v && std::isfinite(*v) ? v : std::nullopt;
}

bool has_measure(const std::string& name) {
  if (name == kSinkStateMeasure) return true;
  for (const auto& m : probe_measure_table())
    if (m.name == name) return true;
  return false;
}

using Seeds = std::map<uint64_t, const ProbeReportRun*>;

std::vector<double> differences(const Seeds& a, const Seeds& b, const std::string& measure) {
  std::vector<double> out;
  for (const auto& [seed, run] : a) {
    const auto it = b.find(seed);
    if (it == b.end()) continue;
    const auto x = probe_value(*run, measure), y = probe_value(*it->second, measure);
    if (x && y) out.push_back(*x - *y);
  }
  return out;
}

struct Group {
  std::map<std::string, Seeds> arms;   ///< the group's own runs by arm and seed
  std::map<std::string, Seeds> twins;  ///< its null twins by arm and seed
};

// Groups by tier and variant; null twins join the group whose variant they twin.
std::map<std::pair<std::string, std::string>, Group> groups_of(const ProbeReport& results) {
  std::map<std::pair<std::string, std::string>, Group> out;
  for (const auto& r : results.runs) {
    if (const auto own = null_twin_of(r.variant)) out[{r.tier, *own}].twins[r.arm][r.seed] = &r;
    else out[{r.tier, r.variant}].arms[r.arm][r.seed] = &r;
  }
  return out;
}

// The floor of `measure`: the sd of every twin's difference from its original.
std::optional<double> probe_floor(const Group& g, const std::string& measure) {
  std::vector<double> all;
  for (const auto& [arm, twins] : g.twins) {
    const auto it = g.arms.find(arm);
    if (it == g.arms.end()) continue;
    const auto d = differences(twins, it->second, measure);
    all.insert(all.end(), d.begin(), d.end());
  }
  return summarize(all).sd;
}

std::string number(double v, bool percent, bool sign) {
  return percent ? fmt::format(fmt::runtime(sign ? "{:+.2f}%" : "{:.2f}%"), 100 * v)
                 : fmt::format(fmt::runtime(sign ? "{:+.4f}" : "{:.4f}"), v);
}

bool is_percent(const std::string& measure) {
  for (const auto& m : probe_measure_table())
    if (m.name == measure) return m.percent;
  return false;
}

// One row per (label, runs, reference runs): m(runs) - m(reference) seed for seed, Holm over the rows.
using Comparison = std::tuple<std::string, const Seeds*, const Seeds*>;
std::vector<ProbePair> measure_pairs(const std::vector<Comparison>& comparisons, const std::string& measure) {
  std::vector<ProbePair> rows;
  for (const auto& [label, runs, reference] : comparisons) {
    ProbePair p;
    p.measure = measure, p.arm = label;
    const auto d = differences(*runs, *reference, measure);
    p.stats = summarize(d);
    p.tests = paired_tests(d, p.stats);
    if (p.stats.n > 0) rows.push_back(p);
  }
  std::vector<std::optional<double>> pv;
  for (const auto& r : rows) pv.push_back(r.tests.t ? r.tests.t->p_value : std::nullopt);
  const auto holm = holm_adjust(pv);
  for (size_t i = 0; i < rows.size(); ++i) rows[i].p_holm = holm[i];
  return rows;
}

// Each arm of `g` (registry order) against `reference`'s runs of `reference_arm`, or of its own
// name when that is empty.
std::vector<Comparison> comparisons(const Group& g, const Group& reference, const std::string& reference_arm) {
  std::vector<Comparison> out;
  for (const auto& arm : all_arms()) {
    const auto it = g.arms.find(arm.name);
    const auto ref = reference.arms.find(reference_arm.empty() ? arm.name : reference_arm);
    if (arm.name == reference_arm || it == g.arms.end() || ref == reference.arms.end()) continue;
    out.emplace_back(arm.name, &it->second, &ref->second);
  }
  return out;
}

// The group's pairs, measure by measure, with the floors of `floor_group`'s twins.
ProbePairGroup pair_group(const std::string& tier, const std::string& variant, const std::vector<Comparison>& rows,
                          const Group& floor_group) {
  ProbePairGroup group{tier, variant, {}, {}, false};
  for (const auto& measure : paired_probe_measures()) {
    if (!has_measure(measure)) continue;
    const auto pairs = measure_pairs(rows, measure);
    if (pairs.empty()) continue;
    group.pairs.insert(group.pairs.end(), pairs.begin(), pairs.end());
    if (!floor_group.twins.empty()) group.floors[measure] = probe_floor(floor_group, measure);
  }
  return group;
}

}  // namespace

const char* const kSinkStateMeasure = "sink_state";

const std::vector<std::string>& paired_probe_measures() {
  // Chance levels are left out: they depend on the tokens and the window, which paired runs share.
  static const std::vector<std::string> names = {"first_key_mass", "trigger_key_mass", "other_key_mass",
                                                 "sink_rate",      "value_drain",      "residual_peak",
                                                 "kurtosis",       "max_inf_norm",     kSinkStateMeasure};
  return names;
}

std::vector<ProbePairGroup> pair_probe_results(const ProbeReport& results) {
  std::vector<ProbePairGroup> out;
  const auto groups = groups_of(results);
  for (const auto& [key, g] : groups) {
    auto group = pair_group(key.first, key.second, comparisons(g, g, "baseline"), g);
    if (!group.pairs.empty()) out.push_back(std::move(group));
  }
  for (const auto& [key, g] : groups) {  // each variant against the tier's plain runs
    const auto plain = groups.find({key.first, ""});
    if (key.second.empty() || plain == groups.end()) continue;
    auto group = pair_group(key.first, key.second, comparisons(g, plain->second, ""), plain->second);
    group.against_plain = true;
    if (!group.pairs.empty()) out.push_back(std::move(group));
  }
  return out;
}

std::string probe_pairs_markdown(const std::vector<ProbePairGroup>& groups) {
  std::ostringstream out;
  for (const auto& g : groups) {
    const bool floor = !g.floors.empty();
    out << "### Paired probe differences, " << g.tier << (g.variant.empty() ? "" : " (" + g.variant + ")")
        << (g.against_plain ? " against the plain runs" : "") << "\n\n"
        << (g.against_plain ? "m(arm, " + g.variant + ") - m(arm) at each seed" : "m(arm) - m(baseline) at each seed")
        << ", model-level values; p Holm over each measure's rows (one family per measure)"
        << (floor ? std::string("; floor: the sd of the measure's null differences m(twin) - m(original)") +
                        (g.against_plain ? " of the plain runs" : "")
                  : "")
        << ".\n\n"
        << "| measure | arm | mean | sd | 95% CI | p (t) | p Holm | same sign | n |" << (floor ? " floor | mean / floor |" : "")
        << "\n|---|---|---:|---:|---:|---:|---:|---:|---:|" << (floor ? "---:|---:|" : "") << "\n";
    for (const auto& p : g.pairs) {
      const bool pct = is_percent(p.measure);
      const auto& s = p.stats;
      const auto& t = p.tests.t;
      out << "| " << p.measure << " | " << p.arm << " | " << number(s.mean, pct, true) << " | "
          << (s.sd ? number(*s.sd, pct, false) : "-") << " | "
          << (t ? "[" + number(t->ci_low, pct, true) + ", " + number(t->ci_high, pct, true) + "]" : "-") << " | "
          << (t && t->p_value ? fmt::format("{:.3g}", *t->p_value) : "-") << " | "
          << (p.p_holm ? fmt::format("{:.3g}", *p.p_holm) : "-") << " | " << s.same_sign << "/" << s.n << " | " << s.n
          << " |";
      if (floor) {
        const auto it = g.floors.find(p.measure);
        const auto f = it == g.floors.end() ? std::nullopt : it->second;
        out << " " << (f ? number(*f, pct, false) : "n/a") << " | "
            << (f && *f > 0 ? fmt::format("{:+.1f}", s.mean / *f) : "n/a") << " |";
      }
      out << "\n";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace attnlab
