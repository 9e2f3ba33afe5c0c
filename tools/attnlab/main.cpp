// attnlab: one program, many subcommands (CLI11). `attnlab --help` lists them.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "attnlab/cpu_math.h"
#include "attnlab/version.h"
#include "commands.h"

int main(int argc, char** argv) {
  attnlab::warm_up_cpu_vector_math();  // before any parallel ATen op (cpu_math.h says why)
  CLI::App app{"attnlab: attention-variant ablations (arms, paired seeds, probes)"};
  app.set_version_flag("--version", "attnlab " + attnlab::version() + " (" + attnlab::git_revision() + ")");
  app.require_subcommand(1);
  attnlab::cli::add_arms_command(app);
  attnlab::cli::add_config_command(app);
  attnlab::cli::add_train_command(app);
  attnlab::cli::add_eval_command(app);
  attnlab::cli::add_sweep_command(app);
  attnlab::cli::add_report_command(app);
  attnlab::cli::add_activations_command(app);
  attnlab::cli::add_retention_command(app);
  attnlab::cli::add_ablate_command(app);
  attnlab::cli::add_probe_command(app);
  attnlab::cli::add_inject_command(app);
  attnlab::cli::add_export_hf_command(app);
  attnlab::cli::add_import_hf_command(app);
  attnlab::cli::add_sample_command(app);
  attnlab::cli::add_watch_command(app);
  attnlab::cli::add_self_check_command(app);
  attnlab::cli::check_integer_ranges(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "attnlab: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
