#include "attnlab/run_state.h"

#include <fmt/format.h>

#include "attnlab/run_dir.h"

namespace attnlab {
namespace fs = std::filesystem;

RunState inspect_run(const fs::path& run_dir, const std::string& expected_hash) {
  const RunDir run(run_dir);
  RunState state;
  if (!run.claimed()) return state;
  state.status = RunStatus::partial;
  const auto ckpts = run.checkpoints();
  state.step = ckpts.empty() ? 0 : ckpts.back().step;
  try {
    state.final_record = run.final_record();
  } catch (const FileError& e) {
    state.detail = fmt::format("final.json damaged ({})", e.problem());
    return state;
  }
  if (!state.final_record) return state;
  state.step = state.final_record->steps;
  const std::string& hash = state.final_record->config_hash;
  if (!expected_hash.empty() && hash != expected_hash) {
    state.status = RunStatus::stale;
    state.detail = fmt::format("final.json is from config {}, the sweep expects {}", hash, expected_hash);
    return state;
  }
  state.status = RunStatus::finished;
  return state;
}

std::string to_string(RunStatus status) {
  switch (status) {
    case RunStatus::not_started: return "not_started";
    case RunStatus::partial: return "partial";
    case RunStatus::finished: return "finished";
    case RunStatus::stale: return "stale";
  }
  return "unknown";
}

std::string describe(const RunState& state) {
  switch (state.status) {
    case RunStatus::not_started: return "not started";
    case RunStatus::partial:
      return fmt::format("partial at step {}{}", state.step, state.detail.empty() ? "" : " (" + state.detail + ")");
    case RunStatus::finished:
      return fmt::format("finished (step {}, val {:.4f})", state.step, state.final_record->final_val_loss);
    case RunStatus::stale: return "stale: " + state.detail;
  }
  return "unknown";
}

}  // namespace attnlab
