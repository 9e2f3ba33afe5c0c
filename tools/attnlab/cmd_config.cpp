// `attnlab config --print|--json --config <yaml> [--set ...]`: the resolved configuration, as a run stores it.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "attnlab/run_config.h"
#include "commands.h"

namespace attnlab::cli {

void add_config_command(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> sets;
    bool print = false, json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("config", "Resolve and check a run config");
  cmd->add_option("--config", args->config, "Run config (YAML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--set", args->sets, "Override a key: --set optim.lr=3e-4 (repeatable)");
  cmd->add_flag("--print", args->print, "Print the resolved configuration (YAML)");
  cmd->add_flag("--json", args->json, "Print the resolved configuration as JSON (every key; for scripts)")
      ->excludes("--print");
  cmd->callback([args] {
    const auto cfg = load_run_config(args->config, args->sets);
    if (args->print) {
      std::cout << to_yaml(cfg);
    } else if (args->json) {
      std::cout << to_json(cfg).dump(2) << '\n';
    } else {
      std::cout << args->config << ": ok (" << cfg.total_steps() << " steps, config hash " << config_hash(cfg) << ")\n";
    }
  });
}

}  // namespace attnlab::cli
