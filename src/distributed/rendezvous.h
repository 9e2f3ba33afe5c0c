// The start-up rendezvous of a job's ranks (docs/distributed.md, "Failures"), before c10d's backend
// is built: each rank claims its RANK in the job's store, says who it is (WORLD_SIZE, pid, host), and
// waits for the others. Gloo's and NCCL's own rendezvous would wait the whole --dist-timeout, saying
// nothing, for a rank that died or was started with another WORLD_SIZE; here the wait says whom it
// waits for, and ends at once when a joined rank's heartbeat stops, when the launcher notes that a
// rank exited, or when the ranks disagree on WORLD_SIZE or two processes claim one RANK.
#pragma once

#include <chrono>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "attnlab/distributed.h"
#include "distributed/liveness.h"

namespace attnlab::dist::detail {

/// Joins `env`'s job through `store` (the job's prefixed store) and returns once all
/// env.world_size ranks have joined. Throws DistributedError naming this rank: another process
/// already joined as this RANK; a rank with another WORLD_SIZE (naming both values and that rank's
/// pid and host); a joined rank whose heartbeat stops; the launcher's note that a rank exited;
/// SIGINT / SIGTERM while waiting; and, after `timeout`, the ranks that never joined (how many of
/// WORLD_SIZE did). Logs, as a warning, whom it waits for after 5 s and every 30 s.
void join_job(c10d::Store& store, const LaunchEnv& env, std::chrono::milliseconds timeout, PulseWatch& pulse);

}  // namespace attnlab::dist::detail
