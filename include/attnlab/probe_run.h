// `attnlab probe` and `attnlab inject` on a checkpoint: choosing the validation tokens, recording
// provenance, writing JSON / CSV / Markdown, and reusing a cached result (the sweep report's path).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/injection.h"
#include "attnlab/probe_result.h"
#include "attnlab/probes.h"

namespace attnlab {

/// Where a probe reads from: a checkpoint (run directory, checkpoint directory, state.json or
/// model.safetensors, as load_model) and a glob of val shards (empty = the run's data.val).
struct ProbeSource {
  std::filesystem::path checkpoint;
  std::string data;
  std::string device = "cpu";  ///< "auto" | "cpu" | "cuda" (kAnalysisDevice by default)
};

/// probe_model() on the chosen tokens, with provenance and conventions. Throws CheckpointError /
/// DataError naming the culprit, and std::invalid_argument when the data hold fewer than N sequences
/// of T tokens or T exceeds the model's context.
ProbeResult run_probe(const ProbeSource& source, const ProbeDataOptions& data);

/// inject_model() on the first N validation sequences of T tokens, with provenance, options and
/// conventions. Throws as run_probe() and check_inject_options().
InjectResult run_inject(const ProbeSource& source, const ProbeDataOptions& data, const InjectOptions& options);

/// run_probe() unless `dir`/probe.json holds a result with the same result_key() that also passes
/// check_probe_summary() for this checkpoint's model and arm; when it computes, it writes
/// probe_files() into `dir` (replacing a file that did not fit, with a warning naming it).
/// `reused` (optional) says which happened. Throws std::runtime_error when probe.json exists but is
/// not a regular file (a directory, say), as well as what run_probe() throws.
ProbeResult cached_probe(const ProbeSource& source, const ProbeDataOptions& data, const std::filesystem::path& dir,
                         bool* reused = nullptr);

/// run_inject() unless `dir`/inject_<kind>_<cutoff>.json holds a result with the same key that also
/// passes check_inject_outcome(); writes inject_files() when it computes. Throws as cached_probe().
InjectResult cached_inject(const ProbeSource& source, const ProbeDataOptions& data, const InjectOptions& options,
                           const std::filesystem::path& dir, bool* reused = nullptr);

/// Files of a probe result by name: probe.json (to_json), probe.md, probe_heads.csv (one row per
/// layer and head), probe_layers.csv (one row per layer and one for the model, every measure a
/// column) and probe_<measure>.csv (a layer x head matrix per per-head measure). Values are
/// written with 6 significant digits in CSV (empty where none or NaN), in percent or with 3 decimals
/// in Markdown ("-" where none or NaN).
std::map<std::string, std::string> probe_files(const ProbeResult& probe);

/// "inject_<kind>_<cutoff>": the name, without extension, of an injection's files.
std::string inject_file_stem(const InjectOptions& options);

/// Files of an injection result: inject_file_stem().json (to_json), .csv (one row per layer set and
/// eps, the clean loss first as eps 0) and .md.
std::map<std::string, std::string> inject_files(const InjectResult& inject);

/// The run directory's probes/ folder when `checkpoint` lies in a run (a run directory, or a
/// checkpoint under <run>/checkpoints/), else ./probes.
std::filesystem::path default_probe_dir(const std::filesystem::path& checkpoint);

/// The "key" of a result: what must match for a cached file to be reused (checkpoint source and
/// step, arm, data pattern, N, T, batch size and probe seed of `provenance`; a probe's trigger
/// tokens; and the injection options)
/// as a JSON object compared whole.
nlohmann::json result_key(const Provenance& provenance);
/// A probe's key: the provenance's, and the trigger tokens when there are any.
nlohmann::json result_key(const Provenance& provenance, const std::vector<int64_t>& trigger_tokens);
nlohmann::json result_key(const Provenance& provenance, const InjectOptions& options);
nlohmann::json result_key(const ProbeResult& probe);
nlohmann::json result_key(const InjectResult& inject);

/// The result in `file` if it exists, reads back (probe_result_from_json / inject_result_from_json)
/// and its result_key() equals `key` and `fits` (when given) does not throw; none otherwise (a file
/// that cannot be opened, does not read back or does not fit is logged as a warning naming it and the
/// reason, then treated as a miss). Throws std::runtime_error naming `file` when it exists but is not
/// a regular file.
std::optional<ProbeResult> read_cached_probe(const std::filesystem::path& file, const nlohmann::json& key,
                                             const std::function<void(const ProbeResult&)>& fits = {});
std::optional<InjectResult> read_cached_inject(const std::filesystem::path& file, const nlohmann::json& key,
                                               const std::function<void(const InjectResult&)>& fits = {});

}  // namespace attnlab
