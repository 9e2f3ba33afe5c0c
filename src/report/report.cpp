// Grouping a sweep's runs by tier (and variant) and computing each group's numbers.
#include <algorithm>
#include <limits>
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

std::optional<std::string> best_arm(const std::vector<ArmResult>& arms) {
  std::optional<std::string> best;
  double lowest = std::numeric_limits<double>::infinity();
  for (const auto& a : arms)
    if (a.stats.n > 0 && a.stats.mean < lowest) lowest = a.stats.mean, best = a.arm;
  return best;
}

// The group's null twins, when the sweep has any, give its noise floor and each difference's ratio to it.
void add_noise_floor(const SweepReport& report, GroupReport& group, const std::vector<const RunRecord*>& runs) {
  std::vector<const RunRecord*> twins;
  for (const auto& r : report.runs)
    if (r.tier == group.tier && r.variant == null_variant(group.variant)) twins.push_back(&r);
  if (twins.empty()) return;
  group.noise_floor = noise_floor(runs, twins);
  const auto& sd = group.noise_floor->stats.sd;
  for (auto& d : group.differences)
    if (d.stats.n > 0 && sd && *sd > 0) d.over_floor = d.stats.mean / *sd;
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
  add_noise_floor(report, group, runs);
  group.tasks = task_reports(runs, arm_order);
  return group;
}

}  // namespace

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
  return report;
}

}  // namespace attnlab
