// Grid -> runs. A run's name comes from its resolved config (tier, arm, seed) plus the other grid
// keys, so it stays the same however the grid is written or reordered.
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "attnlab/sweep.h"
#include "common/durable_file.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

using Point = std::vector<std::pair<std::string, std::string>>;

const GridAxis* find_axis(const std::vector<GridAxis>& grid, const std::string& key) {
  for (const auto& axis : grid)
    if (axis.key == key) return &axis;
  return nullptr;
}

// Cartesian product, tier outermost (per-tier lists depend on it), then file order, last fastest.
std::vector<Point> grid_points(const std::vector<GridAxis>& grid) {
  std::vector<Point> points;
  const GridAxis* tier_axis = find_axis(grid, "tier");
  const std::vector<std::string> tiers = tier_axis ? tier_axis->values : std::vector<std::string>{""};
  for (const auto& tier : tiers) {
    std::vector<Point> partial = {tier_axis ? Point{{"tier", tier}} : Point{}};
    for (const auto& axis : grid) {
      if (axis.key == "tier") continue;
      const auto& values = axis.per_tier.empty() ? axis.values : axis.per_tier.at(tier);
      std::vector<Point> next;
      for (const auto& p : partial)
        for (const auto& v : values) {
          next.push_back(p);
          next.back().emplace_back(axis.key, v);
        }
      partial = std::move(next);
    }
    points.insert(points.end(), partial.begin(), partial.end());
  }
  return points;
}

std::string includes_yaml(const SweepSpec& spec, const std::vector<std::string>& includes) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "include" << YAML::Value << YAML::BeginSeq;
  for (const auto& inc : includes) out << inc;
  out << YAML::EndSeq << YAML::EndMap;
  return "# Written by attnlab sweep from " + spec.file.string() + ": the base config, then the tier (later keys win).\n" +
         out.c_str() + "\n";
}

// Fills name / variant / out_dir from the resolved config and the non-(tier, arm, seed) grid keys;
// a null twin's variant ends in "null".
void name_run(const SweepSpec& spec, SweepRun& run, bool null_twin) {
  std::string variant;
  for (const auto& [key, value] : run.point) {
    if (key == "tier" || key == "model.arm" || key == "seed") continue;
    variant += (variant.empty() ? "" : "/") + variant_part(key, value);
  }
  if (null_twin) variant = null_variant(variant);
  const auto& cfg = run.resolved;
  run.variant = variant;
  run.name = sweep_run_name(cfg.tier, cfg.model.arm, variant, cfg.seed);
  run.out_dir = spec.out / run.name;
}

// A scratch directory for the tier files while resolving (expansion must not write into `out`).
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "attnlab_sweep_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw SweepError("cannot create a temporary directory in " + fs::temp_directory_path().string());
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);  // best effort: a leftover in the temporary directory harms nothing
  }
};

// `twin_seeds`: a null twin's init_seed= and data_seed= overrides, after the grid point's.
SweepRun resolve_run(const SweepSpec& spec, const Point& point, const fs::path& scratch,
                     const std::vector<std::string>& twin_seeds = {}) {
  SweepRun run;
  run.point = point;
  run.includes = {spec.base.string()};
  fs::path config = spec.base;
  std::string tier;
  for (const auto& [key, value] : point)
    if (key == "tier") tier = value;
  if (!tier.empty()) {
    run.includes.push_back((spec.tiers_dir / (tier + ".yaml")).string());
    run.config = spec.out / "configs" / (tier + ".yaml");
    config = scratch / (tier + ".yaml");
    detail::write_file_atomically(config, includes_yaml(spec, run.includes));
  } else {
    run.config = spec.base;
  }
  run.overrides.push_back("train.threads=" + std::to_string(spec.threads_per_run));
  run.overrides.insert(run.overrides.end(), spec.set.begin(), spec.set.end());
  for (const auto& [key, value] : point)
    if (key != "tier") run.overrides.push_back(key + "=" + value);
  run.overrides.insert(run.overrides.end(), twin_seeds.begin(), twin_seeds.end());
  try {
    run.resolved = load_run_config(config, run.overrides);
  } catch (const ConfigError& e) {
    std::string where;
    for (const auto& [key, value] : point) where += " " + key + "=" + value;
    throw ConfigError(spec.file.string() + ": run" + where + ": " + e.what());
  }
  name_run(spec, run, !twin_seeds.empty());
  run.overrides.push_back("out_dir=" + run.out_dir.string());
  run.resolved.out_dir = run.out_dir.string();
  run.config_hash = config_hash(run.resolved);
  return run;
}

// The null twin of `original`: the same run under init seed + offset, on the same data order.
SweepRun null_twin(const SweepSpec& spec, const SweepRun& original, const fs::path& scratch) {
  const auto& cfg = original.resolved;
  const uint64_t offset = spec.null_pairs->init_seed_offset;
  if (cfg.effective_init_seed() > UINT64_MAX - offset)
    throw SweepError(fmt::format("{}: null_pairs.init_seed_offset: run {}'s init seed {} + {} is beyond 2^64 - 1",
                                 spec.file.string(), original.name, cfg.effective_init_seed(), offset));
  return resolve_run(spec, original.point, scratch,
                     {"init_seed=" + std::to_string(cfg.effective_init_seed() + offset),
                      "data_seed=" + std::to_string(cfg.effective_data_seed())});
}

// The twins of every run of the null_pairs arms (in null_pairs.grids, when it names some; `grid_of`:
// each run's grid index); an arm without a run there is refused (a misspelt name).
std::vector<SweepRun> null_twins(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                                 const std::vector<size_t>& grid_of, const fs::path& scratch) {
  std::vector<SweepRun> twins;
  if (!spec.null_pairs) return twins;
  const auto& only = spec.null_pairs->grids;
  auto twinned = [&](size_t i) { return !only || std::find(only->begin(), only->end(), grid_of[i]) != only->end(); };
  for (const auto& arm : spec.null_pairs->arms) {
    const auto before = twins.size();
    for (size_t i = 0; i < runs.size(); ++i)
      if (runs[i].resolved.model.arm == arm && twinned(i)) twins.push_back(null_twin(spec, runs[i], scratch));
    if (twins.size() == before)
      throw SweepError(spec.file.string() + ": null_pairs.arms: " + arm + " has no run in the grid" +
                       (only ? "s null_pairs.grids names" : ""));
  }
  return twins;
}

}  // namespace

std::vector<SweepRun> expand_sweep(const SweepSpec& spec) {
  ScratchDir scratch;
  std::vector<SweepRun> runs;
  std::vector<size_t> grid_of;
  for (size_t g = 0; g < spec.grids.size(); ++g)
    for (const auto& point : grid_points(spec.grids[g])) {
      runs.push_back(resolve_run(spec, point, scratch.path));
      grid_of.push_back(g);
    }
  for (auto& twin : null_twins(spec, runs, grid_of, scratch.path)) runs.push_back(std::move(twin));
  std::set<std::string> names;
  std::map<std::string, std::string> by_config;  // resolved config but out_dir -> the first run with it
  for (const auto& run : runs) {
    if (!names.insert(run.name).second)
      throw SweepError(spec.file.string() + ": two grid points give the run " + run.name + " (a value listed twice?)");
    // Two grid values that read as one config (model.window_pattern G and GG, docs/windows.md) would
    // train the same run twice, and the report would count one seed as two.
    auto resolved = to_json(run.resolved);
    resolved.erase("out_dir");
    const auto [it, fresh] = by_config.emplace(resolved.dump(), run.name);
    if (!fresh)
      throw SweepError(spec.file.string() + ": the runs " + it->second + " and " + run.name +
                       " resolve to the same config (config hash " + run.config_hash +
                       "): their grid values mean the same run; list one of them");
  }
  return runs;
}

void write_run_configs(const SweepSpec& spec, const std::vector<SweepRun>& runs) {
  for (const auto& run : runs) {
    if (run.includes.size() < 2) continue;
    fs::create_directories(run.config.parent_path());
    detail::write_file_atomically(run.config, includes_yaml(spec, run.includes));
  }
}

std::vector<std::string> train_arguments(const SweepRun& run) {
  std::vector<std::string> args = {"train", "--config", run.config.string()};
  for (const auto& o : run.overrides) {
    args.push_back("--set");
    args.push_back(o);
  }
  return args;
}

std::vector<RunState> inspect_runs(const std::vector<SweepRun>& runs) {
  std::vector<RunState> states;
  for (const auto& run : runs) states.push_back(inspect_run(run.out_dir, run.config_hash));
  return states;
}

}  // namespace attnlab
