// Where a training session starts (internal to src/train): the run directory claimed, and the state
// training continues from: a fresh one, the newest good checkpoint of the directory, or the
// checkpoint --branch-from names (docs/checkpoints.md, docs/retention.md).
#pragma once

#include <chrono>
#include <optional>

#include "attnlab/checkpoint.h"
#include "attnlab/run_dir.h"
#include "attnlab/run_metrics.h"
#include "train/trainee.h"

namespace attnlab::training {

/// The run directory's side of a session: what the loop advances and saves.
struct Run {
  RunDir dir;
  std::optional<RunWriter> writer;  ///< rank 0's, once the directory is claimed; none on other ranks
  TrainState state;                 ///< after state.step steps
  bool resumed = false;             ///< started from a checkpoint, this run's or a branch's parent
  std::optional<ScheduleChange> schedule_change;  ///< a resume's changed step budget
  double elapsed_before = 0.0;      ///< seconds spent in earlier sessions of this run
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  /// Wall seconds of the run, every session of it.
  double elapsed() const;
  /// metrics.jsonl opened for this session (rank 0), without the lines logged after state.step; a
  /// fresh start drops every line a run that never checkpointed left, step 0's probe included.
  std::optional<MetricsLog> open_metrics() const;
};

/// Claims cfg.out_dir (rank 0; after the branch's checks for a branch) and restores `t` from where
/// the run continues. Throws TrainError for a directory of another run, a branch with nothing to
/// train, or a config that may not continue the checkpoint; CheckpointError when every checkpoint
/// is damaged.
Run start_run(const RunConfig& cfg, Trainee& t, const TrainOptions& options);

}  // namespace attnlab::training
