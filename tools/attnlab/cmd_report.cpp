// `attnlab report <sweep dir> [--format md|csv|json] [--out DIR] [--compare-paper] [--plots]`
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "attnlab/report.h"
#include "commands.h"
#include "plot_paths.h"
#include "report_probes.h"
#include "wd_command.h"

namespace attnlab::cli {
namespace {
namespace fs = std::filesystem;

void print(const SweepReport& report, const std::string& format) {
  if (format == "json") {
    std::cout << report_json(report).dump(2) << "\n";
  } else if (format == "csv") {
    for (const auto& [name, text] : report_csv(report)) std::cout << "# " << name << "\n" << text << "\n";
  } else {
    std::cout << report_markdown(report);
  }
}

}  // namespace

void add_report_command(CLI::App& app) {
  struct Args {
    std::string dir, format = "md", out, python, plot_script;
    bool compare_paper = false, plots = false, wd = false, quiet = false;
    ProbeReportOptions probes;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("report", "Paired-seed report of a sweep (SPEC section 3): losses per arm, paired "
                                           "differences, the paper's table; Markdown, CSV, JSON, plots");
  cmd->add_option("dir", args->dir, "Sweep directory (the sweep's out: holds manifest.json)")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--format", args->format, "What to print: md | csv | json (every format is also written to --out)")
      ->check(CLI::IsMember({"md", "csv", "json"}))->capture_default_str();
  cmd->add_option("--out", args->out, "Directory for report.md, report.json, *.csv and plots (default: <dir>/report)");
  cmd->add_flag("--compare-paper", args->compare_paper, "Put paper_figures.md's numbers beside ours");
  cmd->add_flag("--plots", args->plots, "Also draw PNGs with tools/plot_report.py (matplotlib)");
  cmd->add_option("--python", args->python, "Python with matplotlib (default: $ATTNLAB_VENV/bin/python)");
  cmd->add_option("--plot-script", args->plot_script, "Path of tools/plot_report.py (default: found from the build)");
  add_probe_report_flags(cmd, args->probes);
  cmd->add_flag("--quiet", args->quiet, "No progress lines for --probes / --inject (stderr, only when it is a terminal)");
  cmd->add_flag("--wd", args->wd, "Weight-decay sweep instead: peak step and size of max |x| per run, "
                                  "t_peak = a - b ln(lambda), peak ~ lambda^p");
  cmd->callback([args] {
    log_to_stderr("report");  // the tables alone on stdout
    const fs::path out = args->out.empty() ? fs::path(args->dir) / "report" : fs::path(args->out);
    if (args->wd) return run_wd_report(args->dir, out, args->plots, args->python);
    const auto report = build_report(args->dir, args->compare_paper);
    write_report_files(report, out);
    print(report, args->format);
    std::cout.flush();  // the table first, then the note on stderr
    std::cerr << fmt::format("attnlab report: wrote report.md, report.json and CSV files to {}\n", out.string());
    if (args->plots) draw_plots(args->python, args->plot_script, "plot_report.py", out / "report.json", out);
    run_probe_report(report, args->probes, out, args->plots, args->python, args->quiet);
  });
}

}  // namespace attnlab::cli
