#include "attnlab/local_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "attnlab/distributed.h"
#include "distributed/job_wait.h"
#include "distributed/process_group.h"
#include "common/child_process.h"
#include "common/signals.h"

namespace attnlab::dist {
namespace {

using Clock = std::chrono::steady_clock;

// The job's rendezvous store, on a free port of the loopback interface (no port to choose, none
// to collide with another job's).
c10::intrusive_ptr<c10d::TCPStore> serve_store() {
  c10d::TCPStoreOptions options;
  options.port = 0;
  options.isServer = true;
  options.waitWorkers = false;
  try {
    return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  } catch (const std::exception& e) {
    throw DistributedError(std::string("--nproc: cannot serve the job's rendezvous store on 127.0.0.1: ") + e.what());
  }
}

std::vector<std::string> rank_environment(const LocalLaunch& launch, int rank, int port) {
  std::vector<std::string> env = {
      "RANK=" + std::to_string(rank),           "LOCAL_RANK=" + std::to_string(rank),
      "WORLD_SIZE=" + std::to_string(launch.nproc), "LOCAL_WORLD_SIZE=" + std::to_string(launch.nproc),
      "MASTER_ADDR=127.0.0.1",                  "MASTER_PORT=" + std::to_string(port),
      "TORCHELASTIC_USE_AGENT_STORE=True",
      "ATTNLAB_LAUNCHER_PID=" + std::to_string(::getpid())};  // a rank ends with this process (distributed.h)
  // As torchrun: N processes that each took every core would fight over them.
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    env.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1L, cores / launch.nproc)));
  }
  return env;
}

std::string describe_exit(int code) {
  return code > 128 ? fmt::format("signal {} ({})", code - 128, strsignal(code - 128)) : fmt::format("exit code {}", code);
}

}  // namespace

int launch_local(const LocalLaunch& launch) {
  if (launch.nproc < 1) throw std::invalid_argument(fmt::format("--nproc {}: must be at least 1", launch.nproc));
  if (launch_env_from_environment()) {
    throw DistributedError("--nproc: this process is already a rank of a job (RANK is set); under torchrun or "
                           "srun, run attnlab train without --nproc");
  }
  const auto store = serve_store();
  const auto notes = c10::make_intrusive<c10d::PrefixStore>(detail::job_prefix(0), store);  // the ranks' keys
  signals::StopRequestScope stop_scope;  // Ctrl-C reaches the ranks too; this process only waits for them
  std::map<int, pid_t> running;  // rank -> pid
  for (int rank = 0; rank < launch.nproc; ++rank) {
    running[rank] = process::spawn(launch.executable, launch.args, {}, rank_environment(launch, rank, store->getPort()));
  }
  spdlog::info("launched {} ranks of {} (rendezvous 127.0.0.1:{})", launch.nproc, launch.executable.string(),
               store->getPort());

  int forwarded = 0, exit_code = 0;  // exit_code: the first failed rank's
  std::optional<Clock::time_point> kill_at;
  while (!running.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (const int sig = signals::stop_requested(); sig != 0 && forwarded == 0) {
      forwarded = sig;  // every rank stops at the same step and rank 0 saves a checkpoint
      for (const auto& [rank, pid] : running) kill(pid, sig);
    }
    for (auto it = running.begin(); it != running.end();) {
      const auto code = process::poll_exit(it->second);
      if (!code) {
        ++it;
        continue;
      }
      if (*code != 0 && exit_code == 0) {
        exit_code = *code;
        // An interrupted rank (130, 143: it checkpointed) is followed by the others at the same step;
        // any other failure leaves them waiting on collectives that cannot complete.
        const bool interrupted = *code == 128 + SIGINT || *code == 128 + SIGTERM;
        if (!interrupted && forwarded == 0) {
          spdlog::error("rank {} failed ({}); stopping the other ranks", it->first, describe_exit(*code));
          // Ranks still waiting for it outside a collective (the rendezvous) stop at once with this note.
          detail::note_failure(*notes, fmt::format("rank {} exited with {}", it->first, describe_exit(*code)));
          for (const auto& [rank, pid] : running) kill(pid, SIGTERM);
        }
        kill_at = Clock::now() + launch.grace;
      }
      it = running.erase(it);
    }
    if (kill_at && Clock::now() >= *kill_at) {
      for (const auto& [rank, pid] : running) {
        spdlog::error("rank {} did not stop within {} s; killing it", rank, launch.grace.count());
        kill(pid, SIGKILL);
      }
      kill_at.reset();
    }
  }
  return exit_code;
}

}  // namespace attnlab::dist
