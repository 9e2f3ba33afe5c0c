// Grouping a sweep's runs by tier (and variant) and computing each group's numbers.
#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include "attnlab/arm.h"
#include "attnlab/report.h"
#include "attnlab/sweep.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// SPEC section 1's arms first, in its order, then any other arm by name.
std::vector<std::string> ordered_arms(const std::set<std::string>& present) {
  std::vector<std::string> out;
  for (const auto& spec : all_arms())
    if (present.count(spec.name)) out.push_back(spec.name);
  for (const auto& arm : present)
    if (std::find(out.begin(), out.end(), arm) == out.end()) out.push_back(arm);
  return out;
}

// `value` of each finished run of `arm` that has one, by seed.
ArmResult arm_values(const std::string& arm, const std::vector<const RunRecord*>& runs,
                     const std::function<std::optional<double>(const RunRecord&)>& value) {
  ArmResult result{arm, {}, {}, std::nullopt};
  std::vector<double> values;
  for (const auto* r : runs)
    if (r->arm == arm && r->finished())
      if (const auto v = value(*r)) {
        result.seeds.push_back({r->seed, *v});
        values.push_back(*v);
      }
  std::sort(result.seeds.begin(), result.seeds.end(), [](auto& a, auto& b) { return a.seed < b.seed; });
  result.stats = summarize(values);
  return result;
}

ArmResult arm_result(const std::string& arm, const std::vector<const RunRecord*>& runs, const std::string& tier,
                     bool compare_paper) {
  ArmResult result = arm_values(arm, runs, final_loss_quantity().value);
  if (compare_paper) result.paper = paper_val_loss(arm, tier);
  return result;
}

// The tasks the group's finished runs scored (docs/downstream.md), each as acc and acc_norm.
std::vector<TaskReport> task_reports(const std::vector<const RunRecord*>& runs, const std::vector<std::string>& arms) {
  std::set<std::string> names;
  for (const auto* r : runs)
    if (r->finished())
      for (const auto& [name, accuracy] : r->final_tasks()) names.insert(name);
  std::vector<TaskReport> out;
  for (const auto& name : names)
    for (const bool norm : {false, true}) {
      TaskReport t{name, norm ? "acc_norm" : "acc", {}, {}};
      const auto error = task_error_quantity(name, norm);
      for (const auto& arm : arms)
        t.arms.push_back(arm_values(arm, runs, [&](const RunRecord& r) -> std::optional<double> {
          const auto it = r.final_tasks().find(name);  // the accuracy itself
          if (it == r.final_tasks().end()) return std::nullopt;
          return norm ? it->second.acc_norm : it->second.acc;
        }));
      for (const auto& contrast : spec_contrasts()) t.differences.push_back(pair_contrast(contrast, runs, error));
      adjust_family(t.differences);
      out.push_back(std::move(t));
    }
  return out;
}

// Each difference's mean over the floor's sd, where the floor has one.
void set_over_floor(std::vector<DifferenceResult>& differences, const std::optional<NoiseFloor>& floor) {
  if (!floor) return;
  const auto& sd = floor->stats.sd;
  for (auto& d : differences)
    if (d.stats.n > 0 && sd && *sd > 0) d.over_floor = d.stats.mean / *sd;
}

// The null twins of the group of `tier` and `variant` (variant "<variant>/null"); empty without any.
std::vector<const RunRecord*> twins_of(const SweepReport& report, const std::string& tier, const std::string& variant) {
  std::vector<const RunRecord*> twins;
  for (const auto& r : report.runs)
    if (r.tier == tier && r.variant == null_variant(variant)) twins.push_back(&r);
  return twins;
}

// The trigger / other domains of the validation loss (eval.trigger_tokens), where a finished run has
// them, each with its own floor from the group's twins (`twins`, maybe none).
std::vector<DomainReport> domain_reports(const std::vector<const RunRecord*>& runs, const std::vector<std::string>& arms,
                                         const std::vector<const RunRecord*>& twins) {
  std::vector<DomainReport> out;
  for (const bool trigger : {true, false}) {
    const auto quantity = domain_loss_quantity(trigger);
    const bool any = std::any_of(runs.begin(), runs.end(),
                                 [&](const RunRecord* r) { return r->finished() && quantity.value(*r).has_value(); });
    if (!any) continue;
    DomainReport d{quantity.name, {}, {}, std::nullopt};
    for (const auto& arm : arms) d.arms.push_back(arm_values(arm, runs, quantity.value));
    for (const auto& contrast : spec_contrasts()) d.differences.push_back(pair_contrast(contrast, runs, quantity));
    adjust_family(d.differences);
    if (!twins.empty()) d.noise_floor = noise_floor(runs, twins, quantity);
    set_over_floor(d.differences, d.noise_floor);
    out.push_back(std::move(d));
  }
  return out;
}

std::optional<std::string> best_arm(const std::vector<ArmResult>& arms) {
  std::optional<std::string> best;
  double lowest = std::numeric_limits<double>::infinity();
  for (const auto& a : arms)
    if (a.stats.n > 0 && a.stats.mean < lowest) lowest = a.stats.mean, best = a.arm;
  return best;
}


GroupReport group_report(const SweepReport& report, const std::string& tier, const std::string& variant) {
  GroupReport group;
  group.tier = tier, group.variant = variant;
  std::vector<const RunRecord*> runs;
  std::set<std::string> arms;
  for (size_t i = 0; i < report.runs.size(); ++i) {
    const auto& r = report.runs[i];
    if (r.tier != tier || r.variant != variant) continue;
    group.runs.push_back(i);
    runs.push_back(&r);
    arms.insert(r.arm);
  }
  const auto arm_order = ordered_arms(arms);
  for (const auto& arm : arm_order) group.arms.push_back(arm_result(arm, runs, tier, report.compare_paper));
  for (const auto& contrast : spec_contrasts()) {
    group.differences.push_back(pair_contrast(contrast, runs));
    if (report.compare_paper) group.differences.back().paper = paper_difference(contrast.id, tier);
  }
  adjust_family(group.differences);
  group.best_arm = best_arm(group.arms);
  const auto twins = twins_of(report, tier, variant);  // the noise floor, when the sweep has twins
  if (!twins.empty()) group.noise_floor = noise_floor(runs, twins);
  set_over_floor(group.differences, group.noise_floor);
  group.tasks = task_reports(runs, arm_order);
  group.domains = domain_reports(runs, arm_order, twins);
  return group;
}

// The contrasts of a windowed group against its full-attention twins (SweepReport::windows).
std::vector<Contrast> window_contrasts(const std::vector<std::string>& arms) {
  const auto full = full_attention_arm;
  std::vector<Contrast> out = {
      {"window_zero_option", "zero-option increment, window", "L(baseline) - L(sink_logit), window",
       {{"baseline", +1}, {"sink_logit", -1}}},
      {"full_zero_option", "zero-option increment, full attention", "L(baseline) - L(sink_logit), full attention",
       {{full("baseline"), +1}, {full("sink_logit"), -1}}},
      {"window_zero_option_shift", "zero-option shift under the window",
       "[L(baseline) - L(sink_logit)] window - [same] full attention",
       {{"baseline", +1}, {"sink_logit", -1}, {full("baseline"), -1}, {full("sink_logit"), +1}}},
  };
  for (const auto& arm : arms)
    out.push_back({"window_cost_" + arm, "window cost " + arm, "L(" + arm + ", window) - L(" + arm + ", full attention)",
                   {{arm, +1}, {full(arm), -1}}});
  return out;
}

// A group `g` beside other runs renamed as arms of their own (`members`: g's runs, then the others):
// the arms' losses, `contrasts` paired and Holm-adjusted, and `floor` against them.
GroupReport paired_beside(const GroupReport& g, const std::vector<RunRecord>& members,
                          const std::vector<Contrast>& contrasts, const std::optional<NoiseFloor>& floor) {
  std::vector<const RunRecord*> runs;
  for (const auto& m : members) runs.push_back(&m);
  GroupReport out;
  out.tier = g.tier, out.variant = g.variant, out.runs = g.runs;
  std::set<std::string> arms;
  for (const auto* r : runs) arms.insert(r->arm);
  for (const auto& arm : arms) out.arms.push_back(arm_values(arm, runs, final_loss_quantity().value));
  for (const auto& contrast : contrasts) out.differences.push_back(pair_contrast(contrast, runs));
  adjust_family(out.differences);
  out.noise_floor = floor;
  set_over_floor(out.differences, out.noise_floor);
  return out;
}

const GroupReport* find_group(const SweepReport& report, const std::string& tier, const std::string& variant) {
  for (const auto& g : report.groups)
    if (g.tier == tier && g.variant == variant) return &g;
  return nullptr;
}

std::vector<std::string> arm_names(const GroupReport& g) {
  std::vector<std::string> out;
  for (const auto& a : g.arms) out.push_back(a.arm);
  return out;
}

// A windowed group with its full-attention twins, found by config hash, as arms "<arm>@full".
std::optional<GroupReport> window_report(const SweepReport& report, const GroupReport& g) {
  std::vector<RunRecord> members;
  std::optional<NoiseFloor> floor = g.noise_floor;
  for (size_t i : g.runs) {
    const auto& r = report.runs[i];
    if (!r.full_attention_hash) return std::nullopt;  // a group mixing windowed and full runs: not one window
    members.push_back(r);
    for (const auto& twin : report.runs)  // the first run of that config is its twin: one per seed
      if (!twin.full_attention_hash && !twin.config_hash.empty() && twin.config_hash == *r.full_attention_hash) {
        members.push_back(twin);
        members.back().arm = full_attention_arm(twin.arm);
        const auto* twins_group = find_group(report, twin.tier, twin.variant);
        if (!floor && twins_group) floor = twins_group->noise_floor;  // the twins' floor, when g has none
        break;
      }
  }
  if (members.size() == g.runs.size()) return std::nullopt;  // no twin in the sweep
  return paired_beside(g, members, window_contrasts(arm_names(g)), floor);
}

// A variant's group beside the tier's plain runs of the same arms, as arms "<arm>@plain".
std::optional<GroupReport> variant_report(const SweepReport& report, const GroupReport& g) {
  const auto* plain = find_group(report, g.tier, "");
  if (g.variant.empty() || !plain) return std::nullopt;
  std::vector<RunRecord> members;
  for (size_t i : g.runs) members.push_back(report.runs[i]);
  std::vector<Contrast> contrasts;
  for (const auto& arm : arm_names(g)) {
    bool shared = false;
    for (size_t i : plain->runs)
      if (report.runs[i].arm == arm) {
        members.push_back(report.runs[i]);
        members.back().arm = plain_variant_arm(arm);
        shared = true;
      }
    if (shared)
      contrasts.push_back({"variant_cost_" + arm, "variant cost " + arm,
                           "L(" + arm + ", " + g.variant + ") - L(" + arm + ")", {{arm, +1}, {plain_variant_arm(arm), -1}}});
  }
  if (contrasts.empty()) return std::nullopt;
  return paired_beside(g, members, contrasts, plain->noise_floor);
}

}  // namespace

std::string full_attention_arm(const std::string& arm) { return arm + "@full"; }
std::string plain_variant_arm(const std::string& arm) { return arm + "@plain"; }

std::vector<std::string> ordered_tiers(const std::vector<std::string>& tiers) {
  static const std::vector<std::string> known = {"micro", "10m", "50m", "124m", "350m"};
  std::vector<std::string> out;
  for (const auto& k : known)
    if (std::find(tiers.begin(), tiers.end(), k) != tiers.end()) out.push_back(k);
  for (const auto& t : tiers)
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  return out;
}

SweepReport build_report(const fs::path& sweep_dir, bool compare_paper) {
  SweepReport report;
  report.sweep_dir = sweep_dir;
  report.from_manifest = fs::exists(sweep_dir / "manifest.json");
  report.compare_paper = compare_paper;
  report.runs = collect_runs(sweep_dir);
  std::vector<std::string> tiers, variants;
  for (const auto& r : report.runs) {
    if (std::find(tiers.begin(), tiers.end(), r.tier) == tiers.end()) tiers.push_back(r.tier);
    if (std::find(variants.begin(), variants.end(), r.variant) == variants.end()) variants.push_back(r.variant);
  }
  for (const auto& tier : ordered_tiers(tiers))
    for (const auto& variant : variants) {
      if (null_twin_of(variant)) continue;  // null twins are their group's noise floor, not a group
      auto group = group_report(report, tier, variant);
      if (!group.runs.empty()) report.groups.push_back(std::move(group));
    }
  for (const auto& g : report.groups) {
    if (auto w = window_report(report, g)) report.windows.push_back(std::move(*w));
    else if (auto v = variant_report(report, g)) report.variants.push_back(std::move(*v));
  }
  return report;
}

}  // namespace attnlab
