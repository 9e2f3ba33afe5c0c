// How a rank waits outside a collective (docs/distributed.md, "Failures"): for the other ranks to join
// the job, for rank 0 to finish writing a checkpoint. It polls the job's store, and stops waiting at
// once, with an error that says why, when the job's failure note appears (a rank refused to join; the
// launcher saw a rank exit), when an awaited rank's heartbeat falls silent (liveness.h), or when this
// process is asked to stop; while it waits it says so in the log, naming what it waits for.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "attnlab/distributed.h"
#include "distributed/liveness.h"

namespace attnlab::dist::detail {

/// The job's store cannot be reached: its server (rank 0, or the launcher) has exited.
struct StoreLost : DistributedError {
  using DistributedError::DistributedError;
};

/// Records `why` ("rank 1 exited with exit code 1") as the reason the job cannot go on, so that every
/// rank waiting in wait_for() stops at once with it. The first note stays; later ones are dropped.
/// Returns once `readers` ranks have read it in wait_for() (5 s at most): a rank that serves the
/// store and is about to exit waits so, or the others would find the store gone, not the note.
void note_failure(c10d::Store& store, const std::string& why, int64_t readers = 0);

/// What one wait_for() waits for.
struct WaitSpec {
  std::string who;                             ///< "rank 1 of 4", the prefix of every message
  std::string during;                          ///< "while the ranks joined the job": ends the errors
  std::function<bool()> done;                  ///< polled every 100 ms; may throw to refuse
  std::function<std::vector<int>()> awaited;   ///< ranks whose heartbeats must go on (checked each second)
  std::function<std::string()> progress;       ///< the log line while waiting (after 5 s, then every 30 s)
  std::optional<std::chrono::milliseconds> limit;  ///< give up after this; none: as long as the awaited live
  std::function<std::string()> on_limit;       ///< the error then
  bool stop_on_signal = false;                 ///< SIGINT / SIGTERM (signals.h) end the wait
};

/// Waits until spec.done() is true. Throws DistributedError, each message starting with spec.who:
/// the failure note (note_failure) if one appears; an awaited rank silent for pulse.limit(); a stop
/// signal (with spec.stop_on_signal); spec.limit passed; and StoreLost when the store cannot be reached.
void wait_for(c10d::Store& store, PulseWatch& pulse, const WaitSpec& spec);

}  // namespace attnlab::dist::detail
