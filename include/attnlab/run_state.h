// Where a run directory stands, read from its files alone (config.yaml, checkpoints/, final.json,
// through RunDir): what `attnlab sweep` uses to skip or resume a run and what `attnlab report` lists.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <optional>

#include "attnlab/final_record.h"

namespace attnlab {

enum class RunStatus {
  not_started,  ///< no config.yaml: the trainer never claimed the directory
  partial,      ///< claimed, no final.json: resumes from checkpoint `step` (0 = none yet)
  finished,     ///< final.json present (and, when a hash was expected, its config_hash matches)
  stale,        ///< final.json from another config (its config_hash differs from the expected one)
};

struct RunState {
  RunStatus status = RunStatus::not_started;
  int64_t step = 0;          ///< partial: newest checkpoint's step; finished / stale: final.json "steps"
  std::optional<FinalRecord> final_record;  ///< final.json (finished / stale); none otherwise
  std::string detail;        ///< why a run is stale or partial despite a final.json (a damaged file)
};

/// Inspects `run_dir`. `expected_hash` (config_hash of the config the run should have; empty = any)
/// separates finished from stale. Never throws for a missing or unreadable file: a final.json that
/// cannot be read as a FinalRecord makes the run partial, saying why in `detail`.
RunState inspect_run(const std::filesystem::path& run_dir, const std::string& expected_hash = "");

/// "not_started" | "partial" | "finished" | "stale" (the manifest's and the JSON report's words).
std::string to_string(RunStatus status);

/// For people: "finished (val 4.1234)", "partial at step 300", "not started", "stale: ...".
std::string describe(const RunState& state);

}  // namespace attnlab
