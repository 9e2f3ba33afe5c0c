// The report as JSON: every number with the seeds behind it, and the validation curves, for
// tools/plot_report.py and for anyone who wants to redo the statistics.
#include "attnlab/report.h"
#include "common/json_number.h"
#include "report/format.h"

namespace attnlab {
namespace {

nlohmann::json stats_json(const SampleStats& s) {
  return {{"n", s.n},
          {"mean", json_number(s.mean)},
          {"sd", s.sd ? nlohmann::json(*s.sd) : nlohmann::json()},
          {"sign", s.sign},
          {"same_sign", s.same_sign}};
}

// The paired t analysis (paired_stats.h) with its Holm adjustment (report.h); every member null for
// one seed.
nlohmann::json paired_t_json(const DifferenceResult& d) {
  const auto& t = d.tests.t;
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  return {{"confidence", 0.95},
          {"df", t ? nlohmann::json(t->df) : nlohmann::json()},
          {"ci", t ? nlohmann::json::array({t->ci_low, t->ci_high}) : nlohmann::json()},
          {"p_value", t ? opt(t->p_value) : nlohmann::json()},
          {"p_value_holm", opt(d.p_holm)},
          {"seeds_needed", t ? opt(t->seeds_needed) : nlohmann::json()},
          {"seeds_for_power", t ? opt(t->seeds_for_power) : nlohmann::json()},
          {"power", kPowerTarget},
          {"power_alpha", kPowerAlpha}};
}

// The exact tests (paired_stats.h): p_value null below 3 non-zero differences (and, for the
// sign-flip test, above kMaxSignFlipValues); p_floor, the smallest p they can give, null for none.
nlohmann::json sign_flip_json(const PairedTests& t) {
  const auto& s = t.sign_flip;
  return {{"p_value", s ? nlohmann::json(s->p_value) : nlohmann::json()},
          {"assignments", s ? nlohmann::json(s->assignments) : nlohmann::json()},
          {"p_floor", json_number(t.exact_p_floor)}};
}
nlohmann::json wilcoxon_json(const PairedTests& t) {
  const auto& w = t.wilcoxon;
  return {{"p_value", w ? nlohmann::json(w->p_value) : nlohmann::json()},
          {"method", w ? nlohmann::json(w->exact ? "exact" : "normal") : nlohmann::json()},
          {"r_plus", w ? nlohmann::json(w->r_plus) : nlohmann::json()},
          {"nonzero", w ? nlohmann::json(w->nonzero) : nlohmann::json()},
          {"zero_method", "wilcox"},
          {"p_floor", json_number(t.exact_p_floor)}};
}

nlohmann::json paper_json(const std::optional<PaperFigure>& p) {
  if (!p) return nullptr;
  nlohmann::json j = {{"low", p->low}, {"high", p->high}};
  if (!p->is_range()) j["value"] = p->low;
  if (!p->note.empty()) j["note"] = p->note;
  return j;
}

nlohmann::json seed_values(const std::vector<SeedValue>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : values) out.push_back({{"seed", v.seed}, {"value", v.value}});
  return out;
}

nlohmann::json run_json(const RunRecord& r) {
  nlohmann::json j = {{"name", r.name},     {"tier", r.tier},   {"variant", r.variant},
                      {"arm", r.arm},       {"seed", r.seed},   {"status", to_string(r.state.status)},
                      {"step", r.state.step}, {"state", describe(r.state)}};
  if (r.finished()) {
    j["final_val_loss"] = r.final_val_loss();
    j["val_tokens"] = r.val_tokens();
    j["val_fingerprint"] = r.val_fingerprint();
  }
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& p : r.curve) curve.push_back({p.step, p.tokens, p.val_loss});
  j["val_curve"] = curve;  // [step, tokens, val_loss] per evaluation
  nlohmann::json train = nlohmann::json::array();
  for (const auto& p : r.train_curve) train.push_back({p.step, p.tokens, p.train_loss});
  j["train_curve"] = train;  // [step, tokens, mean train_loss] per bin of steps (every step up to 512)
  return j;
}

nlohmann::json difference_json(const DifferenceResult& d) {
  nlohmann::json terms = nlohmann::json::object();
  for (const auto& [arm, coef] : d.contrast.terms) terms[arm] = coef;
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& s : d.skipped) skipped.push_back({{"seed", s.seed}, {"reason", s.reason}});
  return {{"id", d.contrast.id},
          {"quantity", d.contrast.quantity},
          {"definition", d.contrast.definition},
          {"terms", terms},
          {"stats", stats_json(d.stats)},
          {"paired_t", paired_t_json(d)},
          {"sign_flip", sign_flip_json(d.tests)},
          {"wilcoxon", wilcoxon_json(d.tests)},
          {"pairs", seed_values(d.pairs)},
          {"skipped", skipped},
          {"paper", paper_json(d.paper)}};
}

// The group's null pairs (report.h NoiseFloor): each difference, the twins not paired, the floor.
nlohmann::json noise_floor_json(const NoiseFloor& f) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& p : f.pairs) pairs.push_back({{"arm", p.arm}, {"seed", p.seed}, {"value", p.value}});
  return {{"stats", stats_json(f.stats)},
          {"floor", f.stats.sd ? nlohmann::json(*f.stats.sd) : nlohmann::json()},
          {"pairs", pairs},
          {"skipped", f.skipped}};
}

// A group's task metrics (docs/downstream.md): the arms' accuracy and the differences of the error
// rate 1 - accuracy, with the ids of their Holm family.
nlohmann::json tasks_json(const GroupReport& g) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : g.tasks) {
    nlohmann::json arms = nlohmann::json::array(), diffs = nlohmann::json::array(), holm = nlohmann::json::array();
    for (const auto& a : t.arms) arms.push_back({{"arm", a.arm}, {"stats", stats_json(a.stats)}, {"seeds", seed_values(a.seeds)}});
    for (const auto& d : t.differences) {
      if (!report_format::in_sweep(g, d)) continue;  // listed once, under the group's not_in_sweep
      auto j = difference_json(d);
      j.erase("paper");
      diffs.push_back(std::move(j));
      if (d.p_holm) holm.push_back(d.contrast.id);
    }
    out.push_back({{"task", t.task}, {"metric", t.metric}, {"quantity", "error rate 1 - " + t.metric},
                   {"arms", arms}, {"differences", diffs}, {"holm_family", holm}});
  }
  return out;
}

// A group's loss domains (eval.trigger_tokens): the arms' loss, the paired differences and, with
// twins, the domain's own floor.
nlohmann::json domains_json(const GroupReport& g) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& dom : g.domains) {
    nlohmann::json arms = nlohmann::json::array(), diffs = nlohmann::json::array(), holm = nlohmann::json::array();
    for (const auto& a : dom.arms) arms.push_back({{"arm", a.arm}, {"stats", stats_json(a.stats)}, {"seeds", seed_values(a.seeds)}});
    for (const auto& d : dom.differences) {
      if (!report_format::in_sweep(g, d)) continue;  // listed once, under the group's not_in_sweep
      auto j = difference_json(d);
      j.erase("paper");
      if (dom.noise_floor) j["over_floor"] = d.over_floor ? nlohmann::json(*d.over_floor) : nlohmann::json();
      diffs.push_back(std::move(j));
      if (d.p_holm) holm.push_back(d.contrast.id);
    }
    out.push_back({{"domain", dom.domain}, {"arms", arms}, {"differences", diffs}, {"holm_family", holm}});
    if (dom.noise_floor) out.back()["noise_floor"] = noise_floor_json(*dom.noise_floor);  // with twins only
  }
  return out;
}

nlohmann::json group_json(const GroupReport& g) {
  nlohmann::json arms = nlohmann::json::array(), diffs = nlohmann::json::array(), runs = nlohmann::json::array();
  nlohmann::json absent = nlohmann::json::array();  // differences whose arms the group never ran
  for (const auto& a : g.arms)
    arms.push_back({{"arm", a.arm}, {"stats", stats_json(a.stats)}, {"seeds", seed_values(a.seeds)},
                    {"paper", paper_json(a.paper)}});
  nlohmann::json holm = nlohmann::json::array();  // the ids of the family p_value_holm adjusts over
  for (const auto& d : g.differences) {
    const auto missing = report_format::arms_not_in(g, d.contrast);
    if (!missing.empty()) {
      absent.push_back({{"id", d.contrast.id}, {"quantity", d.contrast.quantity}, {"missing_arms", missing}});
    } else {
      diffs.push_back(difference_json(d));
      if (g.noise_floor) diffs.back()["over_floor"] = d.over_floor ? nlohmann::json(*d.over_floor) : nlohmann::json();
    }
    if (d.p_holm) holm.push_back(d.contrast.id);
  }
  for (size_t i : g.runs) runs.push_back(i);
  nlohmann::json j = {{"tier", g.tier},
                      {"variant", g.variant},
                      {"arms", arms},
                      {"best_arm", g.best_arm ? nlohmann::json(*g.best_arm) : nlohmann::json()},
                      {"differences", diffs},
                      {"holm_family", holm},
                      {"not_in_sweep", absent},
                      {"runs", runs}};  // indices into the top-level "runs"
  if (g.noise_floor) j["noise_floor"] = noise_floor_json(*g.noise_floor);  // only where the sweep has null pairs
  if (!g.tasks.empty()) j["tasks"] = tasks_json(g);  // runs without tasks: the report of before
  if (!g.domains.empty()) j["domains"] = domains_json(g);  // likewise without eval.trigger_tokens
  return j;
}

}  // namespace

nlohmann::json report_json(const SweepReport& r) {
  nlohmann::json runs = nlohmann::json::array(), groups = nlohmann::json::array();
  for (const auto& run : r.runs) runs.push_back(run_json(run));
  for (const auto& g : r.groups) groups.push_back(group_json(g));
  nlohmann::json windows = nlohmann::json::array();
  for (const auto& w : r.windows) windows.push_back(group_json(w));
  nlohmann::json variants = nlohmann::json::array();
  for (const auto& v : r.variants) variants.push_back(group_json(v));
  nlohmann::json paper = nullptr;
  if (r.compare_paper) {
    paper = {{"tiers", paper_tiers()}, {"differences", nlohmann::json::object()}, {"best_arm", nlohmann::json::object()}};
    for (const auto& c : spec_contrasts())
      for (const auto& t : paper_tiers())
        if (const auto p = paper_difference(c.id, t)) paper["differences"][c.id][t] = paper_json(p);
    for (const auto& t : paper_tiers())
      if (const auto best = paper_best_arm(t))
        paper["best_arm"][t] = {{"arm", *best}, {"val_loss", paper_val_loss(*best, t)->low}};
  }
  nlohmann::json out = {{"format", "attnlab-report"},
          {"version", 1},
          {"sweep_dir", r.sweep_dir.string()},
          {"units", "final validation loss in nats/token; differences in nats, positive when the arm subtracted is better"},
          {"from_manifest", r.from_manifest},
          {"tier_order", ordered_tiers([&] {
             std::vector<std::string> t;
             for (const auto& g : r.groups) t.push_back(g.tier);
             if (r.compare_paper) t.insert(t.end(), paper_tiers().begin(), paper_tiers().end());
             return t;
           }())},
          {"runs", runs},
          {"groups", groups},
          {"paper", paper}};
  if (!windows.empty()) out["windows"] = windows;  // windowed sweeps only: other reports keep their keys
  if (!variants.empty()) out["variants"] = variants;  // grid lists with plain runs only
  return out;
}

}  // namespace attnlab
