#include "attnlab/run_state.h"

#include <fstream>

#include <fmt/format.h>

#include "attnlab/checkpoint.h"

namespace attnlab {
namespace fs = std::filesystem;

namespace {

int64_t newest_checkpoint_step(const fs::path& run_dir) {
  const auto ckpts = list_checkpoints(run_dir);
  return ckpts.empty() ? 0 : ckpts.back().step;
}

}  // namespace

RunState inspect_run(const fs::path& run_dir, const std::string& expected_hash) {
  RunState state;
  if (!fs::exists(run_dir / "config.yaml")) return state;
  state.status = RunStatus::partial;
  state.step = newest_checkpoint_step(run_dir);
  const fs::path final_path = run_dir / "final.json";
  if (!fs::exists(final_path)) return state;
  std::ifstream in(final_path);
  auto final_json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (final_json.is_discarded() || !final_json.is_object() || !final_json.value("final_val_loss", nlohmann::json()).is_number()) {
    state.detail = "final.json unreadable or without a numeric final_val_loss";
    return state;
  }
  state.final_json = std::move(final_json);
  state.step = state.final_json.value("steps", int64_t{0});
  const std::string hash = state.final_json.value("config_hash", std::string());
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
      return fmt::format("finished (step {}, val {:.4f})", state.step, state.final_json.value("final_val_loss", 0.0));
    case RunStatus::stale: return "stale: " + state.detail;
  }
  return "unknown";
}

}  // namespace attnlab
