// Where a run directory stands, read from its files alone (config.yaml, checkpoints/, final.json,
// the lock, through RunDir): what `attnlab sweep` uses to skip, resume or leave a run alone and what
// `attnlab report` lists. docs/runs.md says what each state means and what to do about a damaged run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "attnlab/final_record.h"

namespace attnlab {

enum class RunStatus {
  not_started,  ///< no config.yaml: the trainer never claimed the directory
  partial,      ///< claimed, no final.json: resumes from checkpoint `step` (0 = none yet)
  finished,     ///< final.json present (and, when a hash was expected, its config_hash matches)
  stale,        ///< final.json from another config (its config_hash differs from the expected one)
  damaged,      ///< unusable as it stands (a file missing or unreadable): `detail` says which and what to do
};

/// The process that holds a run directory's lock (RunDir::claim): it is training the run now.
struct RunHolder {
  int64_t pid = 0;   ///< 0 when unknown (the holder has not written it yet)
  std::string host;  ///< where that pid lives
};

/// "pid 1234 on host node17".
std::string to_string(const RunHolder& holder);

struct RunState {
  RunStatus status = RunStatus::not_started;
  int64_t step = 0;          ///< partial: newest checkpoint's step; finished / stale: final.json "steps"
  std::optional<FinalRecord> final_record;  ///< final.json (finished / stale); none otherwise
  std::string detail;        ///< stale: why; damaged: the file, what is wrong with it and the remedy
  std::optional<RunHolder> held_by;  ///< another process holds the directory (whatever the status)
};

/// Inspects `run_dir`. `expected_hash` (config_hash of the config the run should have; empty = any)
/// separates finished from stale. A run is damaged when its directory holds run files (checkpoints/,
/// metrics.jsonl, final.json, probes/) or anything else but no config.yaml, when config.yaml does not
/// load, or when final.json cannot be read as a FinalRecord. Never throws: whatever cannot be read
/// makes the run damaged, saying why in `detail`.
RunState inspect_run(const std::filesystem::path& run_dir, const std::string& expected_hash = "");

/// "not_started" | "partial" | "finished" | "stale" | "damaged" (the manifest's and the JSON
/// report's words).
std::string to_string(RunStatus status);

/// For people: "finished (val 4.1234)", "partial at step 300", "not started", "stale: ...",
/// "DAMAGED: <file>: <problem>; <remedy>", each followed by "; held by pid N on host H" when held.
std::string describe(const RunState& state);

}  // namespace attnlab
