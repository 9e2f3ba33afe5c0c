// `attnlab train --config <yaml> [--set key=value ...] [--branch-from <checkpoint>]`
#include <csignal>
#include <memory>

#include "attnlab/trainer.h"
#include "commands.h"

namespace attnlab::cli {

void add_train_command(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> sets;
    std::string branch_from;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("train", "Train one run from a YAML config (resumes when its out_dir has checkpoints)");
  cmd->add_option("--config", args->config, "Run config (YAML; may include tier files)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", args->sets, "Override a key: --set optim.lr=3e-4 (repeatable)");
  cmd->add_option("--branch-from", args->branch_from,
                  "Start a new run from this checkpoint (or run dir) with its full state; out_dir must be new");
  cmd->callback([args] {
    const StopSignalScope stop_signals;  // before any work: the whole start-up stops cleanly on SIGTERM
    auto cfg = load_run_config(args->config, args->sets);
    TrainOptions options;
    if (!args->branch_from.empty()) options.branch_from = args->branch_from;
    const auto result = train(cfg, options);
    // An interrupted run exits as the signal would have (130 for SIGINT), so shells and sweep runners
    // see that it did not finish.
    if (result.status == TrainStatus::interrupted) throw CLI::RuntimeError(128 + (result.signal ? result.signal : SIGINT));
  });
}

}  // namespace attnlab::cli
