#include "attnlab/run_state.h"

#include <fmt/format.h>

#include "attnlab/run_dir.h"
#include "common/file_lock.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// Reads what `run` says into `state`; throws (FileError) where a file is damaged.
void read_state(const RunDir& run, const std::string& expected_hash, RunState& state) {
  state.held_by = run.holder();
  if (!run.claimed()) {
    if (const auto why = run.unclaimable_reason(); !why.empty()) throw FileError(run.path(), why);
    return;
  }
  run.config();  // a config.yaml that does not load would stop every `attnlab train` of the run
  state.status = RunStatus::partial;
  const auto ckpts = run.checkpoints();
  state.step = ckpts.empty() ? 0 : ckpts.back().step;
  state.final_record = run.final_record();
  if (!state.final_record) return;
  state.step = state.final_record->steps;
  const std::string& hash = state.final_record->config_hash;
  if (!expected_hash.empty() && hash != expected_hash) {
    state.status = RunStatus::stale;
    state.detail = fmt::format("final.json is from config {}, the sweep expects {}", hash, expected_hash);
    return;
  }
  state.status = RunStatus::finished;
}

}  // namespace

RunState inspect_run(const fs::path& run_dir, const std::string& expected_hash) {
  RunState state;
  try {
    read_state(RunDir(run_dir), expected_hash, state);
  } catch (const std::exception& e) {  // what cannot be read is the run's damage, never the caller's stop
    state.status = RunStatus::damaged;
    state.final_record.reset();
    state.detail = e.what();
  }
  return state;
}

std::string to_string(const RunHolder& holder) { return detail::describe(detail::LockHolder{holder.pid, holder.host}); }

std::string to_string(RunStatus status) {
  switch (status) {
    case RunStatus::not_started: return "not_started";
    case RunStatus::partial: return "partial";
    case RunStatus::finished: return "finished";
    case RunStatus::stale: return "stale";
    case RunStatus::damaged: return "damaged";
  }
  return "unknown";
}

std::string describe(const RunState& state) {
  std::string text;
  switch (state.status) {
    case RunStatus::not_started: text = "not started"; break;
    case RunStatus::partial: text = fmt::format("partial at step {}", state.step); break;
    case RunStatus::finished:
      text = fmt::format("finished (step {}, val {:.4f})", state.step, state.final_record->final_val_loss);
      break;
    case RunStatus::stale: text = "stale: " + state.detail; break;
    case RunStatus::damaged: text = "DAMAGED: " + state.detail; break;
  }
  if (state.held_by) text += "; held by " + to_string(*state.held_by);
  return text;
}

}  // namespace attnlab
