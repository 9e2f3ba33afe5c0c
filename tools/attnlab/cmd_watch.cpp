// `attnlab watch RUN_OR_SWEEP --tensorboard DIR [--wandb] [--follow]`: live metrics. The runs are
// found as `attnlab report` finds them (manifest.json, else run directories with a config.yaml);
// tools/watch_metrics.py, run by the venv's Python in place of this process, follows each run's
// metrics.jsonl and writes TensorBoard events (and W&B offline runs), so the trainer stays free of
// Python (docs/monitoring.md).
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnlab/report.h"
#include "commands.h"
#include "plot_paths.h"

namespace attnlab::cli {
namespace fs = std::filesystem;
namespace {

// "sl" for runs/sl, runs/sl/ and ./runs/sl/.
std::string base_name(const fs::path& path) {
  auto p = fs::absolute(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

constexpr double kMaxPollSeconds = 3600;  // tools/watch_metrics.py's limit too

// One --run argument of watch_metrics.py: where the run is and the tags it gets.
std::string run_argument(const fs::path& root, const RunRecord& run) {
  const bool single = run.name == ".";
  const fs::path dir = single ? root : root / run.name;
  return nlohmann::json({{"name", single ? base_name(root) : run.name},
                         {"dir", dir.string()},
                         {"tier", run.tier},
                         {"arm", run.arm},
                         {"seed", run.seed},
                         {"variant", run.variant}})
      .dump();
}

[[noreturn]] void exec(const fs::path& python, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(python.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(python.c_str(), argv.data());
  throw std::runtime_error(fmt::format("watch: cannot run {}: {}", python.string(), std::strerror(errno)));
}

}  // namespace

void add_watch_command(CLI::App& app) {
  struct Args {
    std::string path, tensorboard, wandb_dir = "wandb", wandb_project = "attnlab", python, script;
    bool wandb = false, follow = false;
    double poll = 5.0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("watch", "Live metrics: TensorBoard events (and W&B offline runs) of a run or a sweep");
  cmd->add_option("path", args->path, "Run directory, or sweep directory (every run in it)")->required();
  cmd->add_option("--tensorboard", args->tensorboard, "Directory of the TensorBoard events (tensorboard --logdir DIR)");
  cmd->add_flag("--wandb", args->wandb, "Also write W&B offline runs (needs `wandb` in the Python; `wandb sync` uploads)");
  cmd->add_option("--wandb-dir", args->wandb_dir, "Where W&B writes its offline runs")->capture_default_str();
  cmd->add_option("--wandb-project", args->wandb_project, "W&B project name")->capture_default_str();
  cmd->add_flag("--follow", args->follow, "Keep following until every run has finished (default: what exists, then exit)");
  cmd->add_option("--poll", args->poll, "Seconds between looks at the files with --follow (at most 3600)")
      ->capture_default_str()
      ->check(positive())
      ->check(CLI::Validator(
          [](std::string& text) {
            const double seconds = std::strtod(text.c_str(), nullptr);  // a number: positive() passed it
            return std::isfinite(seconds) && seconds <= kMaxPollSeconds
                       ? std::string()
                       : fmt::format("must be at most {} seconds, got '{}'", kMaxPollSeconds, text);
          },
          "<= 3600"));
  cmd->add_option("--python", args->python, "Python with tensorboard (default: the project's venv)");
  cmd->add_option("--script", args->script, "tools/watch_metrics.py to run (default: the source tree's)");
  cmd->callback([args] {
    if (args->tensorboard.empty() && !args->wandb) throw std::runtime_error("watch: give --tensorboard DIR, --wandb, or both");
    const fs::path root(args->path);
    const auto runs = collect_runs(root);  // throws naming the directory when it holds no run
    const fs::path python = args->python.empty() ? venv_python() : fs::path(args->python);
    const fs::path script = args->script.empty() ? source_tool("watch_metrics.py") : fs::path(args->script);
    if (!fs::exists(python))
      throw std::runtime_error("watch: no Python at '" + python.string() + "'; run scripts/setup.sh or pass --python");
    if (!fs::exists(script)) throw std::runtime_error("watch: script '" + script.string() + "' not found; pass --script");
    std::vector<std::string> argv = {script.string(), "--group", base_name(root),
                                     "--poll", fmt::format("{}", args->poll)};
    if (!args->tensorboard.empty()) argv.insert(argv.end(), {"--tensorboard", args->tensorboard});
    if (args->wandb) argv.insert(argv.end(), {"--wandb", "--wandb-dir", args->wandb_dir, "--wandb-project", args->wandb_project});
    if (args->follow) argv.push_back("--follow");
    for (const auto& run : runs) argv.insert(argv.end(), {"--run", run_argument(root, run)});
    exec(python, argv);
  });
}

}  // namespace attnlab::cli
