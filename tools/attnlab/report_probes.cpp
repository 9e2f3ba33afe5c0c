#include "report_probes.h"

#include "commands.h"
#include "plot_paths.h"
#include "attnlab/run_dir.h"

#include <iostream>

#include <fmt/format.h>

#include "attnlab/progress.h"

namespace attnlab::cli {
namespace fs = std::filesystem;

void add_probe_report_flags(CLI::App* cmd, ProbeReportOptions& o) {
  cmd->add_flag("--probes", o.probes, "Also probe every finished run (first-key mass, read-norm ratio, phantom mass, "
                                      "exposure; cached in <run>/probes)");
  cmd->add_flag("--inject", o.inject, "Also inject junk into every finished run (dose-response per arm and junk kind; "
                                      "cached in <run>/probes)");
  cmd->add_option("--probe-sequences", o.data.sequences, "N validation sequences per probe / injection")
      ->capture_default_str()->check(positive());
  cmd->add_option("--probe-length", o.data.length, "T tokens per sequence (default: each run's train.seq_len)");
  cmd->add_option("--probe-data", o.data_pattern, "Val shards for probes (default: each run's data.val)");
  cmd->add_option("--inject-eps", o.eps, "Doses")->delimiter(',')->check(non_negative())->capture_default_str();
  cmd->add_option("--inject-seed", o.seed, "Seed of the junk draws (the same for every arm)")
      ->check(non_negative())->capture_default_str();
  cmd->add_option("--probe-device", o.device, "auto | cpu | cuda")->capture_default_str();
}

void run_probe_report(const SweepReport& report, const ProbeReportOptions& options, const fs::path& out, bool plots,
                      const std::string& python, bool quiet) {
  if (!options.probes && !options.inject) return;
  const std::string what = std::string("report") + (options.probes ? " --probes" : "") + (options.inject ? " --inject" : "");
  Progress progress(what, "runs", progress_wanted(quiet), 0.0);
  auto o = options;
  o.progress = &progress;
  const auto results = collect_probe_results(report, o);
  const auto files = probe_report_files(results, report.compare_paper);
  write_outputs(out, files);
  std::cout << "\n" << files.at("probes.md");
  std::cout.flush();
  std::cerr << fmt::format("attnlab report: wrote probes.md and probes.json to {}\n", out.string());
  if (plots) draw_plots(python, "", "plot_probes.py", out / "probes.json", out);
  // A run that could not be probed is in the tables as such; the exit status says so too.
  int failed = 0;
  std::string first;
  for (const auto& run : results.runs)
    if (run.error && failed++ == 0) first = run.name + ": " + *run.error;
  if (failed > 0)
    throw std::runtime_error(fmt::format("probes failed for {} of {} finished runs (first: {})", failed,
                                         results.runs.size(), first));
}

}  // namespace attnlab::cli
