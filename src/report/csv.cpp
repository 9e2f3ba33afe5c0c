// The report as CSV files (one table each), for spreadsheets and pandas.
#include <algorithm>
#include <sstream>

#include "attnlab/report.h"
#include "common/csv_table.h"
#include "report/format.h"

namespace attnlab {
namespace {

using csv::number;
using csv::Table;

std::vector<std::string> stats_cells(const SampleStats& s) {
  return {std::to_string(s.n), number(s.mean), s.sd ? number(*s.sd) : "", std::to_string(s.same_sign)};
}

// The test columns of a difference (paired_stats.h, report.h); empty where none.
const std::vector<std::string> kTestColumns = {"ci95_low",        "ci95_high",   "p_value",    "seeds_needed", "p_value_holm",
                                               "seeds_for_power", "p_sign_flip", "p_wilcoxon", "exact_p_floor"};
std::vector<std::string> test_cells(const DifferenceResult& d) {
  auto p = [](const std::optional<double>& v) { return v ? number(*v) : std::string(); };
  auto seeds = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string(); };
  const auto& t = d.tests.t;
  const auto& flip = d.tests.sign_flip;
  const auto& wilcoxon = d.tests.wilcoxon;
  return {t ? number(t->ci_low) : "",
          t ? number(t->ci_high) : "",
          t ? p(t->p_value) : "",
          t ? seeds(t->seeds_needed) : "",
          p(d.p_holm),
          t ? seeds(t->seeds_for_power) : "",
          flip ? number(flip->p_value) : "",
          wilcoxon ? number(wilcoxon->p_value) : "",
          p(d.tests.exact_p_floor)};
}

// A difference row: the stats, then the test columns.
void add_difference_cells(std::vector<std::string>& row, const DifferenceResult& d) {
  for (const auto& c : stats_cells(d.stats)) row.push_back(c);
  for (const auto& c : test_cells(d)) row.push_back(c);
}

std::string paper_cell(const std::optional<PaperFigure>& p) {
  if (!p) return "";
  return p->is_range() ? number(p->low) + " to " + number(p->high) : number(p->low);
}

std::string runs_csv(const SweepReport& r) {
  Table t({"name", "tier", "variant", "arm", "seed", "status", "step", "final_val_loss", "val_tokens", "val_fingerprint", "state"});
  for (const auto& run : r.runs)
    t.row({run.name, run.tier, run.variant, run.arm, std::to_string(run.seed), to_string(run.state.status),
           std::to_string(run.state.step), run.finished() ? number(run.final_val_loss()) : "",
           run.finished() ? std::to_string(run.val_tokens()) : "", run.finished() ? std::to_string(run.val_fingerprint()) : "",
           describe(run.state)});
  return t.str();
}

std::string losses_csv(const SweepReport& r) {
  std::vector<std::string> header = {"tier", "variant", "arm", "n", "mean", "sd", "seeds", "best"};
  if (r.compare_paper) header.push_back("paper");
  Table t(header);
  for (const auto& g : r.groups)
    for (const auto& a : g.arms) {
      std::vector<std::string> row = {g.tier, g.variant, a.arm, std::to_string(a.stats.n), number(a.stats.mean),
                                      a.stats.sd ? number(*a.stats.sd) : "", report_format::seed_list(a.seeds),
                                      g.best_arm && *g.best_arm == a.arm ? "1" : "0"};
      if (r.compare_paper) row.push_back(paper_cell(a.paper));
      t.row(row);
    }
  return t.str();
}

bool has_noise_floor(const SweepReport& r) {
  return std::any_of(r.groups.begin(), r.groups.end(), [](const GroupReport& g) { return g.noise_floor.has_value(); });
}

std::string differences_csv(const SweepReport& r) {
  std::vector<std::string> header = {"tier", "variant", "id", "quantity", "definition", "n", "mean", "sd", "same_sign"};
  header.insert(header.end(), kTestColumns.begin(), kTestColumns.end());
  const bool floor = has_noise_floor(r);  // the column only where a sweep has null pairs
  if (floor) header.push_back("over_floor");
  if (r.compare_paper) header.push_back("paper");
  Table t(header);
  for (const auto& g : r.groups)
    for (const auto& d : g.differences) {
      if (!report_format::in_sweep(g, d)) continue;
      std::vector<std::string> row = {g.tier, g.variant, d.contrast.id, d.contrast.quantity, d.contrast.definition};
      add_difference_cells(row, d);
      if (floor) row.push_back(d.over_floor ? number(*d.over_floor) : "");
      if (r.compare_paper) row.push_back(paper_cell(d.paper));
      t.row(row);
    }
  return t.str();
}

// One line per (difference, seed): its value, or why that seed was not paired.
std::string pairs_csv(const SweepReport& r) {
  Table t({"tier", "variant", "id", "seed", "value", "not_paired_because"});
  for (const auto& g : r.groups)
    for (const auto& d : g.differences) {
      if (!report_format::in_sweep(g, d)) continue;
      for (const auto& p : d.pairs) t.row({g.tier, g.variant, d.contrast.id, std::to_string(p.seed), number(p.value), ""});
      for (const auto& s : d.skipped) t.row({g.tier, g.variant, d.contrast.id, std::to_string(s.seed), "", s.reason});
    }
  return t.str();
}

// The paper_figures.md table in long form: one line per (quantity, tier).
std::string paper_table_csv(const SweepReport& r) {
  std::vector<std::string> header = {"variant", "id", "tier", "n", "mean", "sd", "same_sign"};
  header.insert(header.end(), kTestColumns.begin(), kTestColumns.end());
  if (r.compare_paper) header.push_back("paper");
  Table t(header);
  for (const auto& g : r.groups)
    for (const auto& d : g.differences) {
      if (d.contrast.id != "zero_option" && d.contrast.id != "filtering_norm" && d.contrast.id != "filtering_proj") continue;
      if (!report_format::in_sweep(g, d)) continue;
      std::vector<std::string> row = {g.variant, d.contrast.id, g.tier};
      add_difference_cells(row, d);
      if (r.compare_paper) row.push_back(paper_cell(d.paper));
      t.row(row);
    }
  return t.str();
}

// One line per null twin: its difference from its original, or why it was not paired.
std::string noise_floor_csv(const SweepReport& r) {
  Table t({"tier", "variant", "arm", "seed", "value", "not_paired_because"});
  for (const auto& g : r.groups) {
    if (!g.noise_floor) continue;
    for (const auto& p : g.noise_floor->pairs) t.row({g.tier, g.variant, p.arm, std::to_string(p.seed), number(p.value), ""});
    for (const auto& s : g.noise_floor->skipped) t.row({g.tier, g.variant, "", "", "", s});
  }
  return t.str();
}

// The arms' task accuracies (docs/downstream.md): one line per (group, task, metric, arm).
std::string task_accuracy_csv(const SweepReport& r) {
  Table t({"tier", "variant", "task", "metric", "arm", "n", "mean", "sd", "seeds"});
  for (const auto& g : r.groups)
    for (const auto& task : g.tasks)
      for (const auto& a : task.arms)
        t.row({g.tier, g.variant, task.task, task.metric, a.arm, std::to_string(a.stats.n), a.stats.n ? number(a.stats.mean) : "",
               a.stats.sd ? number(*a.stats.sd) : "", report_format::seed_list(a.seeds)});
  return t.str();
}

// differences.csv's columns for the error rate 1 - metric of each task.
std::string task_differences_csv(const SweepReport& r) {
  std::vector<std::string> header = {"tier", "variant", "task", "metric", "id", "quantity", "n", "mean", "sd", "same_sign"};
  header.insert(header.end(), kTestColumns.begin(), kTestColumns.end());
  Table t(header);
  for (const auto& g : r.groups)
    for (const auto& task : g.tasks)
      for (const auto& d : task.differences) {
        if (!report_format::in_sweep(g, d)) continue;
        std::vector<std::string> row = {g.tier, g.variant, task.task, task.metric, d.contrast.id, d.contrast.quantity};
        add_difference_cells(row, d);
        t.row(row);
      }
  return t.str();
}

std::string task_pairs_csv(const SweepReport& r) {
  Table t({"tier", "variant", "task", "metric", "id", "seed", "value", "not_paired_because"});
  for (const auto& g : r.groups)
    for (const auto& task : g.tasks)
      for (const auto& d : task.differences) {
        if (!report_format::in_sweep(g, d)) continue;
        const std::vector<std::string> key = {g.tier, g.variant, task.task, task.metric, d.contrast.id};
        auto row = [&](std::vector<std::string> tail) {
          auto cells = key;
          cells.insert(cells.end(), tail.begin(), tail.end());
          t.row(cells);
        };
        for (const auto& p : d.pairs) row({std::to_string(p.seed), number(p.value), ""});
        for (const auto& s : d.skipped) row({std::to_string(s.seed), "", s.reason});
      }
  return t.str();
}

}  // namespace

std::map<std::string, std::string> report_csv(const SweepReport& r) {
  std::map<std::string, std::string> files = {{"runs.csv", runs_csv(r)},
                                              {"losses.csv", losses_csv(r)},
                                              {"differences.csv", differences_csv(r)},
                                              {"pairs.csv", pairs_csv(r)},
                                              {"paper_table.csv", paper_table_csv(r)}};
  if (has_noise_floor(r)) files["noise_floor.csv"] = noise_floor_csv(r);
  bool tasks = false;
  for (const auto& g : r.groups) tasks = tasks || !g.tasks.empty();
  if (tasks) {  // a sweep without eval.tasks writes the files it always did
    files["task_accuracy.csv"] = task_accuracy_csv(r);
    files["task_differences.csv"] = task_differences_csv(r);
    files["task_pairs.csv"] = task_pairs_csv(r);
  }
  return files;
}

}  // namespace attnlab
