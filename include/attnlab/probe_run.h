// `attnlab probe` and `attnlab inject` on a checkpoint: choosing the validation tokens, recording
// provenance, writing JSON / CSV / Markdown, and reusing a cached result (the sweep report's path).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "attnlab/injection.h"
#include "attnlab/probes.h"

namespace attnlab {

/// Where a probe reads from: a checkpoint (run directory, checkpoint directory, state.json or
/// model.safetensors, as load_model) and a glob of val shards (empty = the run's data.val).
struct ProbeSource {
  std::filesystem::path checkpoint;
  std::string data;
  std::string device = "cpu";  ///< "auto" | "cpu" | "cuda" (kAnalysisDevice by default)
};

/// probe_model() on the chosen tokens, with provenance. Returns {"provenance": {...}, "conventions":
/// [...], "summary": probe_summary()}. Throws CheckpointError / DataError naming the culprit, and
/// std::invalid_argument when the data hold fewer than N sequences of T tokens or T exceeds the
/// model's context.
nlohmann::json run_probe(const ProbeSource& source, const ProbeDataOptions& data);

/// inject_model() on the first N validation sequences of T tokens, with provenance and options.
/// Returns {"provenance", "options": {"kind", "cutoff", "eps", "layers", "seed"}, "conventions",
/// "result": inject_model()}. Throws as run_probe() and check_inject_options().
nlohmann::json run_inject(const ProbeSource& source, const ProbeDataOptions& data, const InjectOptions& options);

/// run_probe() unless `dir`/probe.json holds a result with the same result_key(); when it computes,
/// it writes probe_files() into `dir`. `reused` (optional) says which happened.
nlohmann::json cached_probe(const ProbeSource& source, const ProbeDataOptions& data, const std::filesystem::path& dir,
                            bool* reused = nullptr);

/// run_inject() unless `dir`/inject_<kind>_<cutoff>.json holds a result with the same key; writes
/// inject_files() when it computes.
nlohmann::json cached_inject(const ProbeSource& source, const ProbeDataOptions& data, const InjectOptions& options,
                             const std::filesystem::path& dir, bool* reused = nullptr);

/// Files of a probe result by name: probe.json, probe.md, probe_heads.csv (one row per layer and
/// head) and probe_<measure>.csv (a layer x head matrix per measure).
std::map<std::string, std::string> probe_files(const nlohmann::json& probe);

/// Files of an injection result: inject_<kind>_<cutoff>.json, .csv (one row per layer set and eps)
/// and .md.
std::map<std::string, std::string> inject_files(const nlohmann::json& inject);

/// The run directory's probes/ folder when `checkpoint` lies in a run (a run directory, or a
/// checkpoint under <run>/checkpoints/), else ./probes.
std::filesystem::path default_probe_dir(const std::filesystem::path& checkpoint);

/// The "key" of a result: what must match for a cached file to be reused (checkpoint step and
/// source, data pattern, N, T, seed, and the injection options).
nlohmann::json result_key(const nlohmann::json& result);

/// The JSON in `file` if it exists, parses and its result_key() equals `key`; null otherwise.
nlohmann::json read_cached(const std::filesystem::path& file, const nlohmann::json& key);

}  // namespace attnlab
