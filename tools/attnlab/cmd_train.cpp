// `attnlab train --config <yaml> [--set key=value ...] [--branch-from <checkpoint>] [--nproc N]`
#include <csignal>
#include <filesystem>
#include <memory>

#include "attnlab/local_launcher.h"
#include "attnlab/trainer.h"
#include "commands.h"

namespace attnlab::cli {
namespace {

struct Args {
  std::string config;
  std::vector<std::string> sets;
  std::string branch_from;
  int nproc = 0;
  int64_t stop_after = 0;
  double dist_timeout_s = 600;
};

// The arguments each rank of `--nproc` gets: this command's, less --nproc.
std::vector<std::string> rank_arguments(const Args& args) {
  std::vector<std::string> out = {"train", "--config", args.config};
  for (const auto& set : args.sets) out.insert(out.end(), {"--set", set});
  if (!args.branch_from.empty()) out.insert(out.end(), {"--branch-from", args.branch_from});
  if (args.stop_after > 0) out.insert(out.end(), {"--stop-after", std::to_string(args.stop_after)});
  out.insert(out.end(), {"--dist-timeout", std::to_string(args.dist_timeout_s)});
  return out;
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "train",
      "Train one run from a YAML config (resumes when its out_dir has checkpoints). Under torchrun or srun "
      "(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT set) it trains as one rank of a data-parallel "
      "job; --nproc N starts such a job on this machine (docs/distributed.md)");
  cmd->add_option("--config", args->config, "Run config (YAML; may include tier files)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", args->sets, "Override a key: --set optim.lr=3e-4 (repeatable)");
  cmd->add_option("--branch-from", args->branch_from,
                  "Start a new run from this checkpoint (or run dir) with its full state; out_dir must be new");
  cmd->add_option("--nproc", args->nproc,
                  "Train as a data-parallel job of N processes on this machine: one per GPU (cuda:0..N-1, NCCL), "
                  "or CPU processes (Gloo); same numbers as one process")
      ->check(positive());
  cmd->add_option("--stop-after", args->stop_after,
                  "Stop after this many optimizer steps in this session, with a checkpoint (resume with the same command)")
      ->check(positive());
  cmd->add_option("--dist-timeout", args->dist_timeout_s,
                  "Data-parallel jobs: seconds a rank waits for the others (rendezvous, each collective) before "
                  "the job ends with an error instead of hanging; rank 0's checkpoint writes are waited for as long "
                  "as it is alive (docs/distributed.md)")
      ->capture_default_str()
      ->check(positive());
  cmd->callback([args] {
    if (args->nproc > 0) {
      const int code = dist::launch_local({args->nproc, std::filesystem::read_symlink("/proc/self/exe"),
                                           rank_arguments(*args)});
      if (code != 0) throw CLI::RuntimeError(code);
      return;
    }
    const StopSignalScope stop_signals;  // before any work: the whole start-up stops cleanly on SIGTERM
    auto cfg = load_run_config(args->config, args->sets);
    TrainOptions options;
    if (!args->branch_from.empty()) options.branch_from = args->branch_from;
    options.stop_after_steps = args->stop_after;
    options.collective_timeout = std::chrono::milliseconds(static_cast<int64_t>(args->dist_timeout_s * 1000));
    const auto result = train(cfg, options);
    // An interrupted run exits as the signal would have (130 for SIGINT), so shells and sweep runners
    // see that it did not finish.
    if (result.status == TrainStatus::interrupted) throw CLI::RuntimeError(128 + (result.signal ? result.signal : SIGINT));
  });
}

}  // namespace attnlab::cli
