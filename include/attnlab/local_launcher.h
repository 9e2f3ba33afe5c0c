// `attnlab train --nproc N`: a data-parallel job of N processes on this machine, as torchrun would
// start it (docs/distributed.md), without needing Python.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace attnlab::dist {

struct LocalLaunch {
  int nproc = 1;                        ///< ranks to start, >= 1
  std::filesystem::path executable;     ///< the program each rank runs (the attnlab binary)
  std::vector<std::string> args;        ///< its arguments, e.g. {"train", "--config", "run.yaml"}
  std::chrono::seconds grace{30};       ///< after a rank fails: SIGTERM the others, SIGKILL after this
};

/// Starts `nproc` copies of `executable args...` with torchrun's environment (RANK = LOCAL_RANK =
/// 0..N-1, WORLD_SIZE = N, MASTER_ADDR = 127.0.0.1, MASTER_PORT = the port of a c10d TCPStore that
/// this process serves for the job, TORCHELASTIC_USE_AGENT_STORE = True, and OMP_NUM_THREADS =
/// cores / N unless set), forwards SIGINT / SIGTERM to them, and waits. When a rank fails, the others
/// are stopped (SIGTERM, then SIGKILL after `grace`) and the job fails. Returns 0 when every rank
/// succeeded, else the exit code of the first rank that failed (128 + signal for a signal). Throws
/// DistributedError when this process is itself a rank (RANK is set) or the store cannot be served,
/// std::invalid_argument when nproc < 1.
int launch_local(const LocalLaunch& launch);

}  // namespace attnlab::dist
