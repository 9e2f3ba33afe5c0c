// `attnlab activations --runs <run dirs...> --out DIR [--plots]` (SPEC section 5).
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnlab/activation_report.h"
#include "attnlab/progress.h"
#include "attnlab/run_dir.h"
#include "commands.h"
#include "plot_paths.h"

namespace attnlab::cli {
namespace {
namespace fs = std::filesystem;

// One line per run and layer: the final checkpoint's sink and peak states, and the lock-in step.
void print_summary(const ActivationsReport& report) {
  std::cout << "| run | layer | sink max | argmax | ratio | massive | lock-in step | rho(first ckpt) | peak max | at (seq, pos) |\n"
               "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& run : report.runs) {
    const auto& final_layers = run.checkpoints.back().capture.layers;
    for (const auto& a : final_layers) {
      const auto& lock = run.lock_in[a.layer];
      std::cout << fmt::format("| {} | {} | {:.3g} | {} | {:.3g} | {} | {} | {:.3f} | {:.3g} | ({}, {}) |\n",
                               run.dir.string(), a.layer,
                               a.sink.max_abs, a.sink.argmax, a.sink.ratio, a.sink.massive ? "yes" : "no",
                               lock ? std::to_string(*lock) : "-", run.spearman_final[a.layer].front(), a.peak.max_abs,
                               a.peak_sequence, a.peak_position);
    }
  }
  for (const auto& o : report.overlaps) {
    std::cout << fmt::format("seeds {} and {} of {} / {}: Jaccard of top-{} sink channels per layer:", o.seed_a,
                             o.seed_b, o.tier, o.arm, report.options.top_k);
    for (double j : o.jaccard) std::cout << fmt::format(" {:.2f}", j);
    std::cout << "\n";
  }
}

}  // namespace

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
  cmd->add_option("--layer", args->scan.layer,
                  "Layer of the step x channel heatmap and the tokens x channels map (-1: the layer of the largest "
                  "final peak)")->capture_default_str();
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
    auto files = activations_csv(report);
    files["activations.json"] = activations_json(report).dump(1) + "\n";
    write_outputs(out, files);
    print_summary(report);
    std::cout.flush();
    std::cerr << fmt::format("attnlab activations: wrote activations.json and CSV files to {}\n", out.string());
    if (args->plots) draw_plots(args->python, args->plot_script, "plot_activations.py", out / "activations.json", out);
  });
}

}  // namespace attnlab::cli
