// The report as Markdown: what `attnlab report` prints and report.md holds.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "attnlab/report.h"
#include "report/format.h"

namespace attnlab {
namespace rf = report_format;
namespace {

// The rows of paper_figures.md's "Paired increments" table that a sweep measures.
const std::vector<std::string> kPaperRows = {"zero_option", "filtering_norm", "filtering_proj"};

std::string run_summary(const SweepReport& r) {
  std::map<RunStatus, int> count;
  for (const auto& run : r.runs) ++count[run.state.status];
  const int damaged = count[RunStatus::damaged];
  return fmt::format("{} runs ({}): {} finished, {} partial, {} stale, {} not started{}.", r.runs.size(),
                     r.from_manifest ? "from manifest.json" : "found by their config.yaml", count[RunStatus::finished],
                     count[RunStatus::partial], count[RunStatus::stale], count[RunStatus::not_started],
                     damaged ? fmt::format(", {} damaged (listed below, each with what to do)", damaged) : "");
}

void arm_table(std::ostream& out, const SweepReport& r, const GroupReport& g) {
  out << "### Final validation loss (nats/token)\n\n| arm | mean | sd | n | seeds |" << (r.compare_paper ? " paper |" : "")
      << "\n|---|---:|---:|---:|---|" << (r.compare_paper ? "---:|" : "") << "\n";
  for (const auto& a : g.arms) {
    out << "| " << a.arm << " | " << (a.stats.n ? rf::loss(a.stats.mean) : "no finished run") << " | "
        << (a.stats.n ? rf::sd(a.stats) : "-")
        << " | " << a.stats.n << " | " << rf::seed_list(a.seeds) << " |";
    if (r.compare_paper) out << " " << (a.paper ? rf::paper(*a.paper, false) : "") << " |";
    out << "\n";
  }
  out << "\nBest arm: " << (g.best_arm ? "**" + *g.best_arm + "**" : std::string("none (no finished run)"));
  for (const auto& a : g.arms)
    if (g.best_arm && a.arm == *g.best_arm) out << " (" << rf::loss_cell(a.stats) << ")";
  if (r.compare_paper)
    if (const auto best = paper_best_arm(g.tier))
      out << "; the paper's best arm at " << g.tier << ": " << *best << " ("
          << rf::paper(*paper_val_loss(*best, g.tier), false) << ")";
  out << "\n\n";
}

// All skip reasons of a difference, each once.
std::string reasons(const DifferenceResult& d) {
  std::set<std::string> seen;
  std::string out;
  for (const auto& s : d.skipped)
    if (seen.insert(s.reason).second) out += (out.empty() ? "" : "; ") + s.reason;
  return out;
}

// "Not in this sweep: standalone gain norm_gate, ... (no run of norm_gate, ...).": the differences
// whose arms the group never ran, once, instead of a row each.
void not_in_sweep_line(std::ostream& out, const GroupReport& g, const std::vector<DifferenceResult>& differences) {
  std::vector<std::string> quantities, arms;
  for (const auto& d : differences) {
    const auto missing = rf::arms_not_in(g, d.contrast);
    if (missing.empty()) continue;
    quantities.push_back(d.contrast.quantity);
    for (const auto& a : missing)
      if (std::find(arms.begin(), arms.end(), a) == arms.end()) arms.push_back(a);
  }
  if (quantities.empty()) return;
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  out << "Not in this sweep: " << join(quantities) << " (no run of " << join(arms) << ").\n\n";
}

std::string null_arms(const NoiseFloor& f) {
  std::vector<std::string> arms;
  for (const auto& p : f.pairs)
    if (std::find(arms.begin(), arms.end(), p.arm) == arms.end()) arms.push_back(p.arm);
  return fmt::format("{}", fmt::join(arms, ", "));
}

void table_row(std::ostream& out, const std::string& label, const std::vector<std::string>& cells) {
  out << "| " << label << " |";
  for (const auto& c : cells) out << " " << c << " |";
  out << "\n";
}

// The group's noise floor: its null pairs' spread, and the twins it could not pair.
void noise_floor_section(std::ostream& out, const NoiseFloor& f) {
  out << "### Noise floor (null pairs: an arm again under another init seed, on the same data)\n\n";
  if (f.pairs.empty()) out << "No null pair finished yet.\n\n";
  else
    out << fmt::format("{} null differences (twin - original, nats): mean {}, sd {} (the floor); arms {}.\n\n",
                       f.stats.n, rf::diff(f.stats.mean), rf::sd(f.stats), null_arms(f));
  for (const auto& skip : f.skipped) out << "- not paired: " << skip << "\n";
  if (!f.skipped.empty()) out << "\n";
}

// "L(baseline) - L(sink_logit)" as "E(baseline) - E(sink_logit)"; gains and overlaps keep their form.
std::string error_definition(const Contrast& c) {
  std::string text = c.definition;
  for (size_t at = text.find("L("); at != std::string::npos; at = text.find("L(", at + 2)) text[at] = 'E';
  return text;
}

// `title`'s table of `differences` (the group's, or with `task` one task metric's or loss domain's:
// then `paper` is off, and with `error_rate` each definition reads E(...)), with `noise_floor` (the
// floor of the table's own quantity; none for tasks, whose items have no twins' spread) after it.
void difference_table(std::ostream& out, const SweepReport& r, const GroupReport& g, const std::string& title,
                      const std::vector<DifferenceResult>& differences, const std::optional<NoiseFloor>& noise_floor,
                      bool task = false, bool error_rate = true) {
  const bool paper = r.compare_paper && !task;
  const bool floor = noise_floor.has_value();
  out << "### " << title << "\n\n"
      << "| quantity | definition | mean | sd | 95% CI | p (t) | p Holm | p sign-flip | p Wilcoxon | same sign | n "
         "| seeds for CI to exclude 0 | seeds for 80% power |"
      << (floor ? " mean / floor |" : "") << (paper ? " paper |" : "")
      << "\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" << (floor ? "---:|" : "")
      << (paper ? "---:|" : "") << "\n";
  std::vector<std::string> notes;
  for (const auto& d : differences) {
    if (!rf::in_sweep(g, d)) continue;
    const auto& s = d.stats;
    const auto test = rf::test_cells(d);
    auto measured = [&](const std::string& c) { return s.n ? c : "-"; };  // no pairs: nothing measured
    std::vector<std::string> cells = {task && error_rate ? error_definition(d.contrast) : d.contrast.definition,
                                      s.n ? rf::diff(s.mean) : "no pairs: " + reasons(d)};
    for (const auto& c : {rf::sd(s), test.interval, test.p, test.p_holm, test.p_sign_flip, test.p_wilcoxon,
                          rf::same_sign(s)})
      cells.push_back(measured(c));
    cells.push_back(std::to_string(s.n));
    cells.push_back(measured(test.seeds));
    cells.push_back(measured(test.seeds_for_power));
    if (floor) cells.push_back(d.over_floor ? fmt::format("{:+.1f}", *d.over_floor) : "n/a");
    if (paper) cells.push_back(d.paper ? rf::paper(*d.paper) : "");
    table_row(out, d.contrast.quantity, cells);
    if (s.n > 0)
      for (const auto& skip : d.skipped)
        notes.push_back(fmt::format("{}: seed {} not paired ({})", d.contrast.quantity, skip.seed, skip.reason));
  }
  out << "\n";
  for (const auto& note : notes) out << "- " << note << "\n";
  if (!notes.empty()) out << "\n";
  not_in_sweep_line(out, g, differences);
  if (floor) noise_floor_section(out, *noise_floor);
}

// A task metric (docs/downstream.md): the arms' accuracy, then the contrasts over the error rate.
void task_tables(std::ostream& out, const SweepReport& r, const GroupReport& g) {
  for (const auto& t : g.tasks) {
    out << "### Task " << t.task << ": " << t.metric << " at the last step\n\n| arm | mean | sd | n | seeds |\n"
        << "|---|---:|---:|---:|---|\n";
    for (const auto& a : t.arms)
      out << "| " << a.arm << " | " << (a.stats.n ? rf::loss(a.stats.mean) : "not scored") << " | "
          << (a.stats.n ? rf::sd(a.stats) : "-") << " | " << a.stats.n << " | " << rf::seed_list(a.seeds) << " |\n";
    out << "\n";
    difference_table(out, r, g,
                     "Task " + t.task + ": paired differences of the error rate E = 1 - " + t.metric +
                         " (positive: the arm subtracted is better)",
                     t.differences, std::nullopt, true);
  }
}

// The validation loss's domains (eval.trigger_tokens): the arms' loss, then the contrasts over it.
void domain_tables(std::ostream& out, const SweepReport& r, const GroupReport& g) {
  for (const auto& d : g.domains) {
    out << "### " << d.domain << " at the last step (nats/token)\n\n| arm | mean | sd | n | seeds |\n"
        << "|---|---:|---:|---:|---|\n";
    for (const auto& a : d.arms)
      out << "| " << a.arm << " | " << (a.stats.n ? rf::loss(a.stats.mean) : "not measured") << " | "
          << (a.stats.n ? rf::sd(a.stats) : "-") << " | " << a.stats.n << " | " << rf::seed_list(a.seeds) << " |\n";
    out << "\n";
    difference_table(out, r, g, d.domain + ": paired differences (nats; positive: the arm subtracted is better)",
                     d.differences, d.noise_floor, true, false);
  }
}

const DifferenceResult* find_difference(const GroupReport& g, const std::string& id) {
  for (const auto& d : g.differences)
    if (d.contrast.id == id) return &d;
  return nullptr;
}

const ArmResult* find_arm(const GroupReport& g, const std::string& arm) {
  for (const auto& a : g.arms)
    if (a.arm == arm) return &a;
  return nullptr;
}

// paper_figures.md's "Paired increments" layout: quantities down, tiers across; with
// --compare-paper a "paper" line under each of ours.
void paper_layout_table(std::ostream& out, const SweepReport& r, const std::string& variant) {
  std::vector<std::string> tiers;
  for (const auto& g : r.groups)
    if (g.variant == variant) tiers.push_back(g.tier);
  if (r.compare_paper) tiers.insert(tiers.end(), paper_tiers().begin(), paper_tiers().end());
  tiers = ordered_tiers(tiers);
  auto group_of = [&](const std::string& tier) -> const GroupReport* {
    for (const auto& g : r.groups)
      if (g.variant == variant && g.tier == tier) return &g;
    return nullptr;
  };
  out << "## Zero option vs filtering" << (variant.empty() ? "" : " (" + variant + ")")
      << " (paper_figures.md layout; mean ± sd (seeds sharing the sign / n, paired t p-value))\n\n| quantity |"
      << (r.compare_paper ? " |" : "");
  for (const auto& t : tiers) out << " " << t << " |";
  out << "\n|---|" << (r.compare_paper ? "---|" : "");
  for (size_t i = 0; i < tiers.size(); ++i) out << "---:|";
  out << "\n";
  for (const auto& id : kPaperRows) {
    const Contrast* c = nullptr;
    for (const auto& k : spec_contrasts())
      if (k.id == id) c = &k;
    std::vector<std::string> ours, paper;
    for (const auto& t : tiers) {
      const auto* g = group_of(t);
      const auto* d = g ? find_difference(*g, id) : nullptr;
      ours.push_back(!d ? "" : rf::in_sweep(*g, *d) ? rf::difference_cell(*d) : "not in this sweep");
      const auto p = paper_difference(id, t);
      paper.push_back(p ? rf::paper(*p) : "");
    }
    const std::string label = c->quantity + ", " + c->definition;
    if (r.compare_paper) ours.insert(ours.begin(), "ours"), paper.insert(paper.begin(), "paper");
    table_row(out, label, ours);
    if (r.compare_paper) table_row(out, "", paper);
  }
  std::vector<std::string> ours, paper;
  for (const auto& t : tiers) {
    const auto* g = group_of(t);
    const auto* a = g && g->best_arm ? find_arm(*g, *g->best_arm) : nullptr;
    ours.push_back(a ? a->arm + " " + rf::loss_cell(a->stats) : "");
    const auto best = paper_best_arm(t);
    paper.push_back(best ? *best + " " + rf::paper(*paper_val_loss(*best, t), false) : "");
  }
  if (r.compare_paper) ours.insert(ours.begin(), "ours"), paper.insert(paper.begin(), "paper");
  table_row(out, "best arm, validation loss", ours);
  if (r.compare_paper) table_row(out, "", paper);
  out << "\n";
}

// Groups paired beside other runs (SweepReport::windows, ::variants): a section per group, what it
// pairs, and its table on its floor.
void beside_tables(std::ostream& out, const SweepReport& r, const std::vector<GroupReport>& groups,
                   const std::string& heading, const std::string& what, const std::string& title) {
  for (const auto& g : groups) {
    out << "## " << heading << ": " << rf::group_title(g) << "\n\n" << what << "\n\n";
    difference_table(out, r, g, title, g.differences, g.noise_floor);
  }
}

void unfinished_list(std::ostream& out, const SweepReport& r) {
  std::vector<const RunRecord*> open;
  for (const auto& run : r.runs)
    if (!run.finished()) open.push_back(&run);
  out << "## Runs not finished (not used in any pair)\n\n";
  if (open.empty()) out << "None: every run finished.\n";
  for (const auto* run : open) out << "- " << run->name << ": " << describe(run->state) << "\n";
}

}  // namespace

std::string report_markdown(const SweepReport& r) {
  std::ostringstream out;
  out << "# attnlab report: " << r.sweep_dir.string() << "\n\n" << run_summary(r) << "\n"
      << "sd: sample standard deviation over seeds (n - 1); 95% CI and p (t): paired t test of mean 0 (Student's t, "
         "n - 1 degrees of freedom; n/a for one seed); p Holm: p (t) adjusted by Holm's method over the rows of its "
         "table that have one; p sign-flip: exact permutation test over the 2^n signs of the differences; p "
         "Wilcoxon: signed-rank test (zeros dropped, midranks for ties; exact up to 50 seeds); both exact tests are "
         "n/a below 3 non-zero differences and cannot go below 2^(1-n) (0.25 at n = 3, 0.125 at 4, 0.0625 at 5), "
         "marked (floor) when they reach it; seeds for CI to exclude 0: how many seeds an interval at this sd would "
         "need to exclude 0; seeds for 80% power: how many a two-sided paired t test at level 0.05 would need to "
         "detect this mean at this sd 8 times in 10 (noncentral t); same sign: seeds whose difference has the sign "
         "of the mean; a pair needs two finished runs with the same tier, seed and validation data. docs/sweeps.md "
         "defines every column.\n\n";
  if (std::any_of(r.groups.begin(), r.groups.end(), [](const GroupReport& g) { return g.noise_floor.has_value(); }))
    out << "mean / floor: the mean in units of the noise floor, the sd of the group's null differences (an arm against "
           "itself under another init seed, on the same data: docs/sweeps.md, \"Null pairs\").\n\n";
  std::vector<std::string> variants;
  for (const auto& g : r.groups) {
    out << "## " << rf::group_title(g) << "\n\n";
    arm_table(out, r, g);
    difference_table(out, r, g, "Paired differences (nats; positive: the arm subtracted is better)", g.differences,
                     g.noise_floor);
    task_tables(out, r, g);
    domain_tables(out, r, g);
    if (std::find(variants.begin(), variants.end(), g.variant) == variants.end()) variants.push_back(g.variant);
  }
  for (const auto& v : variants) paper_layout_table(out, r, v);
  beside_tables(out, r, r.windows, "Zero-option increment under windows",  // docs/windows.md
                "Each windowed run against its full-attention twin: the run of the same config without the window keys "
                "(same seed, so the same initial parameters and batches). Arms marked @full are the twins.",
                "Window differences (nats; positive: the arm subtracted is better)");
  beside_tables(out, r, r.variants, "Variant against the plain runs",  // docs/sweeps.md, "Grid lists"
                "Each run of the variant against the tier's run of the same arm and seed without the variant's grid keys "
                "(the same initial parameters and batches). Arms marked @plain are those runs; the floor is theirs.",
                "Variant differences (nats; positive: the plain run is better)");
  unfinished_list(out, r);
  return out.str();
}

}  // namespace attnlab
