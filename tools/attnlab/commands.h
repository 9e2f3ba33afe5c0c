// Subcommands of the `attnlab` program; each lives in its own cmd_*.cpp and registers itself on the
// CLI11 app. A subcommand's callback throws on bad input; main() turns that into a one-line error.
#pragma once

#include <CLI/CLI.hpp>

namespace attnlab::cli {

void add_arms_command(CLI::App& app);
void add_config_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_activations_command(CLI::App& app);
void add_retention_command(CLI::App& app);
void add_ablate_command(CLI::App& app);
void add_probe_command(CLI::App& app);
void add_inject_command(CLI::App& app);

}  // namespace attnlab::cli
