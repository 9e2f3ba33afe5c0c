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
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "attnlab/report.h"
#include "attnlab/sweep.h"
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

// The name a lone run has in the sweep that holds it (its path below the nearest ancestor whose
// manifest.json lists it), so one run of a sweep is the same TensorBoard run as when the sweep is
// watched, and two runs' "s1" directories do not share a name; else its directory's name.
std::string single_run_name(const fs::path& run_dir) {
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(fs::absolute(run_dir), ec);
  for (fs::path up = dir.parent_path(); !ec && up.has_relative_path(); up = up.parent_path()) {
    if (!fs::is_regular_file(up / "manifest.json", ec)) continue;
    const std::string name = dir.lexically_relative(up).generic_string();
    try {
      for (const auto& entry : read_manifest(up).value_or(std::vector<ManifestEntry>{}))
        if (entry.name == name) return name;
    } catch (const SweepError& e) {
      spdlog::warn("watch: {} (naming {} by its directory instead)", e.what(), run_dir.string());
    }
    break;  // the nearest sweep decides
  }
  return base_name(run_dir);
}

// What watch_metrics.py is told of a run: where it is below the root ("." for the root itself) and,
// when they could be read, its tags.
struct WatchedRun {
  std::string name;
  std::optional<ManifestEntry> tags;
};

// True when each file of the run is absent or a regular file, so the report's reader may look at it
// (a FIFO would block it for ever); the follower names what is wrong with the others.
bool plain_files(const fs::path& dir) {
  for (const char* name : {"config.yaml", "final.json", "metrics.jsonl"}) {
    std::error_code ec;
    const auto type = fs::status(dir / name, ec).type();
    if (type != fs::file_type::not_found && type != fs::file_type::regular) return false;
  }
  return true;
}

// The runs under `root`, found as `attnlab report` finds them (the manifest's entries, else the run
// directories with a config.yaml; the root itself when it is one) but without reading their
// metrics.jsonl: the follower reads those, and refuses what is not a file, without blocking.
std::vector<WatchedRun> find_runs(const fs::path& root) {
  std::vector<WatchedRun> runs;
  const fs::path manifest = root / "manifest.json";
  std::error_code ec;
  if (fs::exists(fs::status(manifest, ec)) && !fs::is_regular_file(manifest, ec))
    throw std::runtime_error("watch: " + manifest.string() + " is not a regular file");
  if (const auto entries = fs::is_regular_file(manifest, ec) ? read_manifest(root) : std::nullopt) {
    for (const auto& e : *entries) runs.push_back({e.name, e});
    return runs;
  }
  if (fs::exists(root / "config.yaml", ec) && !plain_files(root)) return {{".", std::nullopt}};
  for (const auto& r : collect_runs(root))  // throws naming the directory when it holds no run
    runs.push_back({r.name, ManifestEntry{r.name, r.tier, r.arm, r.variant, "", r.seed}});
  return runs;
}

// One --run argument of watch_metrics.py: where the run is and the tags it gets.
std::string run_argument(const fs::path& root, const WatchedRun& run) {
  const bool single = run.name == ".";
  nlohmann::json arg = {{"name", single ? single_run_name(root) : run.name},
                        {"dir", (single ? root : root / run.name).string()}};
  if (run.tags) {
    arg["tier"] = run.tags->tier, arg["arm"] = run.tags->arm, arg["seed"] = run.tags->seed;
    arg["variant"] = run.tags->variant;
  }
  return arg.dump();
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
    const auto runs = find_runs(root);
    if (runs.empty()) throw std::runtime_error("watch: " + root.string() + ": its manifest.json lists no runs");
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
