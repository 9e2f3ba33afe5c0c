// `attnlab activations --runs <run dirs...> --out DIR [--plots]` (SPEC section 5).
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "attnlab/activation_report.h"
#include "attnlab/progress.h"
#include "attnlab/run_dir.h"
#include "commands.h"
#include "plot_paths.h"

namespace attnlab::cli {
namespace fs = std::filesystem;

void add_activations_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> runs;
    std::string out, python, plot_script;
    ActivationScanOptions scan;
    bool plots = false, quiet = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "activations",
      "Massive activations at every checkpoint of one or more runs (SPEC section 5): per-layer statistics of the sink "
      "and peak states, lock-in step, Spearman with the final ranking, top-k overlap across seeds; JSON, CSV, PNG");
  cmd->add_option("--runs", args->runs, "Run directories (their checkpoints/ are scanned)")
      ->required()->expected(1, -1)->check(CLI::ExistingDirectory);
  cmd->add_option("--out", args->out, "Directory for activations.json, *.csv and the PNGs")->required();
  cmd->add_option("--sequences", args->scan.sequences, "Probe batch: the first N validation sequences")
      ->check(positive())->capture_default_str();
  cmd->add_option("--val", args->scan.val, "Validation shard glob (default: each run's data.val)");
  cmd->add_option("--top-k", args->scan.top_k, "Channels listed per state and compared across seeds")
      ->check(positive())->capture_default_str();
  cmd->add_option("--residual", args->scan.layer,
                  "Residual state l in [0, n_layer] of the step x channel heatmap and the tokens x channels map "
                  "(-1: the one of the largest final peak)")->capture_default_str();
  add_renamed_option(cmd, "--layer", "--residual", "the residual state after block l of the maps");
  cmd->add_option("--massive-max", args->scan.massive.min_max, "'Massive': max |x_c| above this ...")->capture_default_str();
  cmd->add_option("--massive-ratio", args->scan.massive.min_ratio, "... and max / median at least this")->capture_default_str();
  cmd->add_flag("--quiet", args->quiet, "No progress lines (they go to stderr, and only when it is a terminal)");
  cmd->add_flag("--plots", args->plots, "Also draw PNGs with tools/plot_activations.py (matplotlib)");
  cmd->add_option("--python", args->python, "Python with matplotlib (default: $ATTNLAB_VENV/bin/python)");
  cmd->add_option("--plot-script", args->plot_script, "Path of tools/plot_activations.py (default: found from the build)");
  cmd->callback([args] {
    log_to_stderr("activations");  // the summary table alone on stdout
    std::vector<fs::path> dirs;
    for (const auto& run : args->runs) {
      for (const auto& seen : dirs)
        if (fs::equivalent(seen, run)) throw std::invalid_argument("--runs names " + run + " twice");
      dirs.emplace_back(run);
    }
    Progress progress("activations", "checkpoints", progress_wanted(args->quiet));
    auto scan = args->scan;
    scan.progress = &progress;
    const auto report = activations_report(dirs, scan);
    const fs::path out(args->out);
    write_outputs(out, activations_files(report));
    std::cout << activations_summary_markdown(report);
    std::cout.flush();
    std::cerr << fmt::format("attnlab activations: wrote activations.json and CSV files to {}\n", out.string());
    if (args->plots) draw_plots(args->python, args->plot_script, "plot_activations.py", out / "activations.json", out);
  });
}

}  // namespace attnlab::cli
