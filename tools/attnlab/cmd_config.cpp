// `attnlab config --print --config <yaml> [--set ...]`: the resolved configuration, as a run stores it.
#include <iostream>
#include <memory>

#include "attnlab/run_config.h"
#include "commands.h"

namespace attnlab::cli {

void add_config_command(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> sets;
    bool print = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("config", "Resolve and check a run config");
  cmd->add_option("--config", args->config, "Run config (YAML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", args->sets, "Override a key: --set optim.lr=3e-4 (repeatable)");
  cmd->add_flag("--print", args->print, "Print the resolved configuration (YAML)");
  cmd->callback([args] {
    const auto cfg = load_run_config(args->config, args->sets);
    if (args->print) {
      std::cout << to_yaml(cfg);
    } else {
      std::cout << args->config << ": ok (" << cfg.total_steps() << " steps, config hash " << config_hash(cfg) << ")\n";
    }
  });
}

}  // namespace attnlab::cli
