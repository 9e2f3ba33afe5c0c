// `attnlab sweep --config configs/sweeps/<name>.yaml [--workers N] [--dry-run] [--emit slurm]`
#include <iostream>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <torch/cuda.h>

#include "attnlab/sweep.h"
#include "commands.h"

namespace attnlab::cli {
namespace {
namespace fs = std::filesystem;

// GPUs the workers can share out: all visible ones, unless every run is pinned to the CPU.
int64_t visible_gpus(const std::vector<SweepRun>& runs) {
  bool wants_gpu = false;
  for (const auto& run : runs) wants_gpu |= run.resolved.train.device != DeviceChoice::cpu;
  return wants_gpu && torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
}

void print_dry_run(const SweepSpec& spec, const std::vector<SweepRun>& runs, int64_t workers) {
  const auto states = inspect_runs(runs);
  std::cout << fmt::format("sweep {}: {} runs under {} (base {}); {} worker(s) by default\n", spec.name, runs.size(),
                           spec.out.string(), spec.base.string(), workers);
  std::cout << "every run: --set train.threads=" << spec.threads_per_run;
  for (const auto& s : spec.set) std::cout << " --set " << s;
  std::cout << "\n\n";
  size_t width = 0;
  for (const auto& run : runs) width = std::max(width, run.name.size());
  std::map<RunStatus, int> count;
  int held = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    ++count[states[i].status];
    held += states[i].held_by.has_value();
    std::cout << fmt::format("  {:<{}}  {}\n", runs[i].name, width, describe(states[i]));
  }
  std::cout << fmt::format("\n{} finished, {} partial, {} stale, {} not started, {} damaged; {} held by another process\n",
                           count[RunStatus::finished], count[RunStatus::partial], count[RunStatus::stale],
                           count[RunStatus::not_started], count[RunStatus::damaged], held);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  struct Args {
    std::string config, emit;
    int64_t workers = 0, gpus = -1, gpus_per_run = 1, nodes_per_run = 1;
    bool dry_run = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("sweep", "Run a grid of training runs (arm x seed x tier ...) from a sweep YAML; "
                                          "re-running finishes an interrupted sweep");
  cmd->add_option("--config", args->config, "Sweep file (configs/sweeps/*.yaml; docs/sweeps.md)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--workers", args->workers, "Concurrent runs (default: cores / threads_per_run, or one per GPU)")
      ->check(non_negative());
  cmd->add_option("--gpus", args->gpus, "GPUs to share among workers (default: every visible GPU unless runs use the CPU)");
  cmd->add_option("--gpus-per-run", args->gpus_per_run,
                  "GPUs per run: each run is a data-parallel job of this many ranks (locally on disjoint GPUs; "
                  "with --emit slurm, one srun task per GPU; docs/distributed.md)")
      ->check(positive());
  cmd->add_option("--nodes-per-run", args->nodes_per_run, "With --emit slurm: nodes per run (--gpus-per-run split evenly)")
      ->check(positive());
  cmd->add_flag("--dry-run", args->dry_run, "List the runs and their state; write nothing");
  cmd->add_option("--emit", args->emit, "Write a scheduler script instead of running: slurm")->check(CLI::IsMember({"slurm"}));
  cmd->callback([args] {
    const auto spec = load_sweep(args->config);
    const auto runs = expand_sweep(spec);
    const fs::path exe = fs::read_symlink("/proc/self/exe");
    SweepOptions options;
    options.executable = exe;
    options.gpus = args->gpus >= 0 ? args->gpus : visible_gpus(runs);
    options.gpus_per_run = args->gpus_per_run;
    options.workers = args->workers > 0 ? args->workers : default_workers(runs, options.gpus, options.gpus_per_run);
    if (args->dry_run) return print_dry_run(spec, runs, options.workers);
    if (args->emit == "slurm") {
      if (args->gpus_per_run % args->nodes_per_run != 0)
        throw SweepError(fmt::format("--gpus-per-run {} does not split evenly over --nodes-per-run {}", args->gpus_per_run,
                                     args->nodes_per_run));
      SlurmLayout layout;
      if (args->gpus_per_run > 1 || args->nodes_per_run > 1)
        layout = {args->gpus_per_run / args->nodes_per_run, args->nodes_per_run};
      const auto scripts = emit_slurm(spec, runs, exe, layout);
      write_manifest(spec, manifest_json(spec, runs, inspect_runs(runs), exe));
      std::cout << fmt::format("wrote {} array(s) of at most {} tasks for {} runs, and {}\nsubmit with:\n",
                               scripts.size(), kSlurmMaxArrayIndex, runs.size(), (spec.out / "manifest.json").string());
      for (const auto& script : scripts) std::cout << "  sbatch " << script.string() << "\n";
      return;
    }
    const auto outcome = run_sweep(spec, runs, options);
    if (const int code = outcome.exit_code()) throw CLI::RuntimeError(code);
  });
}

}  // namespace attnlab::cli
