// Reading a sweep file (docs/sweeps.md). Values stay YAML text: they become `--set key=value`
// arguments, which the run config parses exactly as it would from the command line.
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "attnlab/sweep.h"
#include "config/yaml_io.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

const std::set<std::string> kSweepKeys = {"name", "base",  "tiers_dir", "out",                 "threads_per_run",
                                          "set",  "grid", "slurm",     "slurm_signal_margin", "null_pairs"};

// A node as the text `--set` would take: scalars verbatim, anything else in flow style.
std::string yaml_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

std::vector<std::string> scalar_list(const YAML::Node& node, const std::string& where) {
  if (node.IsScalar()) return {node.Scalar()};
  if (!node.IsSequence() || node.size() == 0) throw SweepError(where + ": expected a non-empty list of values");
  std::vector<std::string> values;
  for (const auto& item : node) values.push_back(yaml_text(item));
  return values;
}

GridAxis read_axis(const std::string& key, const YAML::Node& node, const std::string& file, const std::string& grid) {
  GridAxis axis{key, {}, {}};
  const std::string where = file + ": " + grid + "." + key;
  if (!node.IsMap()) {
    axis.values = scalar_list(node, where);
    return axis;
  }
  if (key == "tier") throw SweepError(where + ": tier takes a list, not a per-tier mapping");
  for (const auto& kv : node) {
    const auto tier = kv.first.as<std::string>();
    axis.per_tier[tier] = scalar_list(kv.second, where + "." + tier);
  }
  return axis;
}

// Every key=value of `set:` (a mapping of dotted keys, or a list of "key=value" strings).
std::vector<std::string> read_set(const YAML::Node& node, const std::string& file) {
  std::vector<std::string> set;
  if (node.IsMap()) {
    for (const auto& kv : node) set.push_back(kv.first.as<std::string>() + "=" + yaml_text(kv.second));
  } else if (node.IsSequence()) {
    for (const auto& item : node) set.push_back(item.as<std::string>());
  } else {
    throw SweepError(file + ": set: expected a mapping of key: value");
  }
  return set;
}

fs::path resolve_against(const fs::path& dir, const std::string& p) {
  return (fs::path(p).is_absolute() ? fs::path(p) : fs::absolute(dir / p)).lexically_normal();
}

// `where` names the grid in messages: "grid" for a single mapping, "grid[i]" in a list.
void check_grid(const SweepSpec& spec, const std::vector<GridAxis>& grid, const std::string& where) {
  const GridAxis* tier = nullptr;
  for (const auto& axis : grid)
    if (axis.key == "tier") tier = &axis;
  for (const auto& axis : grid) {
    if (axis.per_tier.empty()) continue;
    if (!tier) throw SweepError(spec.file.string() + ": " + where + "." + axis.key + ": per-tier values need a " + where + ".tier list");
    for (const auto& t : tier->values)
      if (!axis.per_tier.count(t))
        throw SweepError(spec.file.string() + ": " + where + "." + axis.key + ": no values for tier " + t);
  }
  if (tier) {
    for (const auto& t : tier->values)
      if (!fs::exists(spec.tiers_dir / (t + ".yaml")))
        throw SweepError(spec.file.string() + ": " + where + ".tier: " + (spec.tiers_dir / (t + ".yaml")).string() +
                         " not found");
  }
}

// One grid mapping: its axes in file order.
std::vector<GridAxis> read_grid(const YAML::Node& node, const std::string& file, const std::string& where) {
  if (!node.IsMap() || node.size() == 0)
    throw SweepError(file + ": " + where + ": expected a mapping of key: [values] (or a list of such mappings)");
  std::vector<GridAxis> grid;
  for (const auto& kv : node) grid.push_back(read_axis(kv.first.as<std::string>(), kv.second, file, where));
  return grid;
}

// `grid:` as one mapping, or a list of them (each one product; their runs one after another).
void read_grids(const YAML::Node& node, SweepSpec& spec) {
  const std::string file = spec.file.string();
  if (!node.IsSequence()) {
    spec.grids.push_back(read_grid(node, file, "grid"));
    check_grid(spec, spec.grids.back(), "grid");
    return;
  }
  if (node.size() == 0) throw SweepError(file + ": grid: an empty list runs nothing; give one mapping or more");
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string where = "grid[" + std::to_string(i) + "]";
    spec.grids.push_back(read_grid(node[i], file, where));
    check_grid(spec, spec.grids.back(), where);
  }
}

// `null_pairs.grids: [0, ...]`: indices into the grid list (checked against it by load_sweep()).
std::vector<size_t> read_grid_indices(const YAML::Node& node, const std::string& where) {
  if (!node.IsSequence() || node.size() == 0) throw SweepError(where + ": expected a non-empty list of grid indices");
  std::vector<size_t> out;
  for (const auto& item : node) {
    try {
      out.push_back(yaml_io::read_scalar<uint64_t>(item, "null_pairs.grids"));
    } catch (const ConfigError& e) {
      throw SweepError(where + ": " + e.what());
    }
  }
  return out;
}

// `null_pairs: {arms: [...], init_seed_offset: N, grids: [...]}`; the arms are checked against the
// runs at expansion.
NullPairs read_null_pairs(const YAML::Node& node, const std::string& file) {
  const std::string where = file + ": null_pairs";
  if (!node.IsMap()) throw SweepError(where + ": expected a mapping with arms: [...] (and init_seed_offset: N)");
  NullPairs pairs;
  for (const auto& kv : node) {
    const auto key = kv.first.as<std::string>();
    if (key != "arms" && key != "init_seed_offset" && key != "grids")
      throw SweepError(where + "." + key + ": unknown key (known: arms, init_seed_offset, grids)");
  }
  if (!node["arms"]) throw SweepError(where + ".arms: required (the arms run twice, under two init seeds)");
  pairs.arms = scalar_list(node["arms"], where + ".arms");
  std::set<std::string> seen;
  for (const auto& arm : pairs.arms)
    if (!seen.insert(arm).second)
      throw SweepError(where + ".arms: " + arm + " is listed twice (each run of an arm has one null twin)");
  if (const auto offset = node["init_seed_offset"]) {
    try {
      pairs.init_seed_offset = yaml_io::read_scalar<uint64_t>(offset, "null_pairs.init_seed_offset");
    } catch (const ConfigError& e) {
      throw SweepError(file + ": " + e.what());
    }
    if (pairs.init_seed_offset == 0)
      throw SweepError(where + ".init_seed_offset: must be positive (0 would run each twin under its original's seed)");
  }
  if (const auto grids = node["grids"]) pairs.grids = read_grid_indices(grids, where + ".grids");
  return pairs;
}

// The `slurm:` options and the warning margin; a margin that leaves the task no time to train is
// refused rather than making every allocation checkpoint, requeue and wait.
void read_slurm(const YAML::Node& root, SweepSpec& spec) {
  const std::string file = spec.file.string();
  if (root["slurm"]) {
    if (!root["slurm"].IsMap()) throw SweepError(file + ": slurm: expected a mapping of sbatch option: value");
    for (const auto& kv : root["slurm"]) spec.slurm.emplace_back(kv.first.as<std::string>(), yaml_text(kv.second));
  }
  std::string limit_text;
  for (const auto& [key, value] : spec.slurm) {
    if (key == "signal")
      throw SweepError(file + ": slurm: signal: the sweep sets --signal itself (USR1, which makes a task checkpoint and "
                       "requeue); give slurm_signal_margin: <seconds> to choose when");
    if (key == "time") {
      try {
        spec.time_limit_s = slurm_time_seconds(value);
      } catch (const SweepError& e) {
        throw SweepError(file + ": " + e.what());
      }
      limit_text = value;
    }
  }
  spec.slurm_signal_margin = default_slurm_signal_margin(spec.time_limit_s);
  if (const auto node = root["slurm_signal_margin"]) {
    try {
      spec.slurm_signal_margin = yaml_io::read_scalar<int64_t>(node, "slurm_signal_margin");
    } catch (const ConfigError& e) {
      throw SweepError(file + ": " + e.what());
    }
    if (spec.slurm_signal_margin < 1 || spec.slurm_signal_margin > 65535)  // sbatch's @sig_time is 16 bits
      throw SweepError(fmt::format("{}: slurm_signal_margin: {} s is not between 1 and 65535 s", file,
                                   spec.slurm_signal_margin));
  }
  if (spec.time_limit_s && *spec.time_limit_s - spec.slurm_signal_margin < kSlurmSignalSlackSeconds)
    throw SweepError(fmt::format(
        "{}: slurm_signal_margin {} s{} does not fit in slurm: time {} ({} s): Slurm may send the warning up to {} s "
        "early, so a task could be told to checkpoint and requeue as soon as it starts. Leave at least {} s of the limit "
        "before the margin: raise slurm: time, or lower slurm_signal_margin",
        file, spec.slurm_signal_margin, root["slurm_signal_margin"] ? "" : " (the default: a tenth of the limit, 10 s to 300 s)",
        limit_text, *spec.time_limit_s, kSlurmSignalSlackSeconds, kSlurmSignalSlackSeconds));
}

}  // namespace

SweepSpec load_sweep(const fs::path& path) {
  const std::string file = path.string();
  YAML::Node root;
  try {
    root = yaml_io::load_yaml_file(path);  // refuses duplicate keys (two grid:), naming both lines
  } catch (const ConfigError& e) {
    throw SweepError(e.what());
  }
  if (!root.IsMap()) throw SweepError(file + ": a sweep file must be a mapping of keys");
  for (const auto& kv : root)
    if (!kSweepKeys.count(kv.first.as<std::string>()))
      throw SweepError(file + ": " + kv.first.as<std::string>() + ": unknown key (known: name, base, tiers_dir, out, "
                       "threads_per_run, set, grid, slurm, slurm_signal_margin, null_pairs)");
  for (const char* key : {"base", "out", "grid"})
    if (!root[key]) throw SweepError(file + ": " + key + ": required");

  SweepSpec spec;
  const fs::path dir = fs::absolute(path).parent_path();
  spec.file = path;
  spec.name = root["name"] ? root["name"].as<std::string>() : path.stem().string();
  spec.base = resolve_against(dir, root["base"].as<std::string>());
  if (!fs::exists(spec.base)) throw SweepError(file + ": base: " + spec.base.string() + " not found");
  spec.tiers_dir = resolve_against(dir, root["tiers_dir"] ? root["tiers_dir"].as<std::string>() : "../tiers");
  spec.out = root["out"].as<std::string>();
  if (root["threads_per_run"]) {
    try {
      spec.threads_per_run = yaml_io::read_scalar<int64_t>(root["threads_per_run"], "threads_per_run");  // never octal
    } catch (const ConfigError& e) {
      throw SweepError(file + ": " + e.what());
    }
    if (spec.threads_per_run < 1) throw SweepError(file + ": threads_per_run: must be at least 1");
  }
  if (root["set"]) spec.set = read_set(root["set"], file);
  read_grids(root["grid"], spec);
  read_slurm(root, spec);
  if (root["null_pairs"]) spec.null_pairs = read_null_pairs(root["null_pairs"], file);
  if (spec.null_pairs && spec.null_pairs->grids)
    for (const size_t i : *spec.null_pairs->grids)
      if (i >= spec.grids.size())
        throw SweepError(fmt::format("{}: null_pairs.grids: {} is not a grid of this sweep (it has {}, from 0)", file, i,
                                     spec.grids.size()));
  return spec;
}

}  // namespace attnlab
