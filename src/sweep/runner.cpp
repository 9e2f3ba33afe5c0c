// The local sweep runner: a pool of `attnlab train` child processes. The trainer does the hard
// parts (claiming the directory, resuming, checkpointing on a signal); the runner only decides what
// to start, forwards signals and keeps the manifest current.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <numeric>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "attnlab/progress.h"
#include "attnlab/sweep.h"
#include "common/child_process.h"
#include "common/file_lock.h"
#include "common/signals.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

struct Worker {
  pid_t pid;
  size_t run;
  int64_t slot;
  Clock::time_point started;
};

int64_t usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

fs::path log_path(const SweepSpec& spec, const SweepRun& run) {
  std::string flat = run.name;
  std::replace(flat.begin(), flat.end(), '/', '_');
  return spec.out / "logs" / (flat + ".log");
}

// The last non-empty line of a worker's log: usually the trainer's one-line error.
std::string last_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// Devices a worker slot may use: CUDA_VISIBLE_DEVICES's list if set, else 0..gpus-1.
std::vector<std::string> gpu_ids(int64_t gpus) {
  std::vector<std::string> ids;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible && *visible) {
    std::stringstream ss(visible);
    for (std::string id; std::getline(ss, id, ',');) ids.push_back(id);
  }
  if (ids.empty())
    for (int64_t i = 0; i < gpus; ++i) ids.push_back(std::to_string(i));
  return ids;
}

// One sweep per output root at a time: two would start the same runs into the same directories.
// The kernel releases the lock when this process ends, however it ends.
detail::FileLock lock_sweep(const fs::path& out) {
  fs::create_directories(out);
  const fs::path path = out / "sweep.lock";
  auto lock = detail::FileLock::try_acquire(path);
  if (!lock) {
    const auto holder = detail::lock_holder(path);
    throw SweepError(path.string() + ": another attnlab sweep is running on " + out.string() + " (" +
                     (holder ? detail::describe(*holder) : std::string("it has just ended")) + ")");
  }
  return std::move(*lock);
}

class Pool {
 public:
  Pool(const SweepSpec& spec, const std::vector<SweepRun>& runs, const SweepOptions& options)
      : spec_(spec), runs_(runs), options_(options) {
    log_ = options.log ? options.log : [](const std::string& line) { spdlog::info("{}", line); };
    workers_ = options.workers > 0 ? options.workers : default_workers(runs, options.gpus, options.gpus_per_run);
    if (options.gpus > 0) gpus_ = gpu_ids(options.gpus);
    per_run_ = std::max<int64_t>(1, options.gpus_per_run);
    if (per_run_ > 1 && static_cast<int64_t>(gpus_.size()) < per_run_ * workers_)
      throw SweepError(fmt::format("sweep: {} worker(s) x --gpus-per-run {} need {} GPUs; {} available", workers_,
                                   per_run_, per_run_ * workers_, gpus_.size()));
    slots_.assign(static_cast<size_t>(workers_), false);
  }

  SweepOutcome run() {
    const auto lock = lock_sweep(spec_.out);
    states_ = inspect_runs(runs_);  // again, now that no other sweep can change them
    write_run_configs(spec_, runs_);
    fs::create_directories(spec_.out / "logs");
    for (size_t i = 0; i < runs_.size(); ++i) {
      if (states_[i].status == RunStatus::finished) ++outcome_.skipped;
      else queue_.push_back(i);
    }
    log_(fmt::format("sweep {}: {} runs, {} finished, {} to run with {} worker(s); logs in {}", spec_.name,
                     runs_.size(), outcome_.skipped, queue_.size(), workers_, (spec_.out / "logs").string()));
    publish();
    signals::StopRequestScope stop_scope;
    while ((!outcome_.signal && !queue_.empty()) || !active_.empty()) {
      forward_stop();
      while (!outcome_.signal && !queue_.empty() && static_cast<int64_t>(active_.size()) < workers_) {
        consider(queue_.front());
        queue_.pop_front();
      }
      reap();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    states_ = inspect_runs(runs_);
    publish();
    log_(fmt::format("sweep {}: {} finished now, {} already finished, {} failed, {} interrupted, {} not started, "
                     "{} damaged, {} held by another process",
                     spec_.name, outcome_.finished, outcome_.skipped, outcome_.failed, outcome_.interrupted,
                     queue_.size(), outcome_.damaged, outcome_.held));
    if (outcome_.damaged || outcome_.held)
      log_("re-run the same command once the damaged runs are mended (see the lines above) and the held ones have "
           "ended; finished runs are not trained again");
    return outcome_;
  }

 private:
  void publish() { write_manifest(spec_, manifest_json(spec_, runs_, states_, options_.executable)); }

  int64_t free_slot() {
    const auto it = std::find(slots_.begin(), slots_.end(), false);
    *it = true;
    return it - slots_.begin();
  }

  // Starts run i unless, looked at again just now, it is finished (by a process outside this sweep),
  // damaged (a person must look at it first) or held (another process is training it: two trainers
  // never share a run, and waiting could idle this worker for hours; the next sweep takes it up).
  void consider(size_t i) {
    const auto& run = runs_[i];
    states_[i] = inspect_run(run.out_dir, run.config_hash);
    const auto& state = states_[i];
    if (state.status == RunStatus::finished) {
      ++outcome_.skipped;
      log_(fmt::format("skip  {}: {}", run.name, describe(state)));
    } else if (state.status == RunStatus::damaged) {
      ++outcome_.damaged;
      log_(fmt::format("DAMAGED {} (not started): {}", run.name, state.detail));
    } else if (state.held_by) {
      ++outcome_.held;
      log_(fmt::format("skip  {}: held by {} (another attnlab train is training it)", run.name,
                       to_string(*state.held_by)));
    } else {
      start(i);
      return;
    }
    publish();
  }

  void start(size_t i) {
    const auto& run = runs_[i];
    const int64_t slot = free_slot();
    std::vector<std::string> env;
    if (!gpus_.empty()) env.push_back("CUDA_VISIBLE_DEVICES=" + devices_of(slot));
    auto args = train_arguments(run);
    if (per_run_ > 1) args.insert(args.end(), {"--nproc", std::to_string(per_run_)});  // one rank per GPU of the slot
    const auto& state = states_[i];
    pid_t pid = 0;
    try {
      pid = process::spawn(options_.executable, args, log_path(spec_, run), env);
    } catch (const std::runtime_error& e) {  // counted like a failed run: the workers already running go on
      ++outcome_.failed;
      slots_[static_cast<size_t>(slot)] = false;
      log_(fmt::format("FAILED {}: {}", run.name, e.what()));
      return;
    }
    active_.push_back({pid, i, slot, Clock::now()});
    log_(fmt::format("start {} ({}){}", run.name,
                     state.status == RunStatus::not_started ? "new" : describe(state),
                     gpus_.empty() ? "" : " on GPU " + devices_of(slot)));
  }

  // The slot's devices: the k-th disjoint set of per_run_ (with one GPU per run, GPUs are shared
  // round-robin when there are more workers than GPUs).
  std::string devices_of(int64_t slot) const {
    std::string ids;
    for (int64_t j = 0; j < per_run_; ++j)
      ids += (j ? "," : "") + gpus_[static_cast<size_t>(slot * per_run_ + j) % gpus_.size()];
    return ids;
  }

  // First stop request: pass it to every child (a terminal's Ctrl-C reaches them anyway; a SIGTERM
  // sent to the sweep alone does not) and start no more runs.
  void forward_stop() {
    const int sig = signals::stop_requested();
    if (!sig || outcome_.signal) return;
    outcome_.signal = sig;
    for (const auto& w : active_) ::kill(w.pid, sig);
    log_(fmt::format("signal {}: waiting for {} run(s) to checkpoint; re-run the same command to continue", sig,
                     active_.size()));
  }

  void reap() {
    for (auto it = active_.begin(); it != active_.end();) {
      const auto code = process::poll_exit(it->pid);
      if (!code) {
        ++it;
        continue;
      }
      finish(*it, *code);
      slots_[static_cast<size_t>(it->slot)] = false;
      it = active_.erase(it);
      publish();
      log_progress();
    }
  }

  // "k of N runs finished": after every run that ends, so a log or a terminal shows where the sweep is.
  void log_progress() {
    std::vector<double> elapsed;
    for (const auto& w : active_) elapsed.push_back(std::chrono::duration<double>(Clock::now() - w.started).count());
    double mean = std::nan("");
    if (!run_seconds_.empty()) mean = std::accumulate(run_seconds_.begin(), run_seconds_.end(), 0.0) / double(run_seconds_.size());
    const bool stopping = outcome_.signal != 0;
    const double eta = sweep_eta_seconds(mean, stopping ? 0 : int64_t(queue_.size()), elapsed, workers_);
    log_(fmt::format("{} of {} runs finished{}, {} running, {} queued{}", outcome_.skipped + outcome_.finished,
                     runs_.size(), outcome_.failed ? fmt::format(" ({} failed)", outcome_.failed) : "",
                     active_.size(), queue_.size(),
                     std::isnan(eta) || eta == 0.0 ? "" : ", ETA " + format_duration(eta)));
  }

  void finish(const Worker& w, int code) {
    const auto& run = runs_[w.run];
    states_[w.run] = inspect_run(run.out_dir, run.config_hash);
    const auto& state = states_[w.run];
    const double secs = std::chrono::duration<double>(Clock::now() - w.started).count();
    if (code == 0 && state.status == RunStatus::finished) {
      ++outcome_.finished;
      run_seconds_.push_back(secs);
      log_(fmt::format("done  {} in {:.0f}s: val loss {:.4f}", run.name, secs, state.final_record->final_val_loss));
    } else if (code != 0 && state.held_by) {  // another process took the run between our look and the claim
      ++outcome_.held;
      log_(fmt::format("skip  {}: held by {} (another attnlab train took it first)", run.name,
                       to_string(*state.held_by)));
    } else if (code >= 128) {
      ++outcome_.interrupted;
      log_(fmt::format("stopped {} ({}, exit {})", run.name, describe(state), code));
    } else {
      ++outcome_.failed;
      log_(fmt::format("FAILED {} (exit {}, {}): {} [log {}]", run.name, code, describe(state),
                       last_line(log_path(spec_, run)), log_path(spec_, run).string()));
    }
  }

  const SweepSpec& spec_;
  const std::vector<SweepRun>& runs_;
  const SweepOptions& options_;
  std::vector<RunState> states_;
  std::function<void(const std::string&)> log_;
  int64_t workers_ = 1;
  std::vector<std::string> gpus_;
  int64_t per_run_ = 1;  // GPUs (ranks) per run
  std::vector<bool> slots_;
  std::vector<Worker> active_;
  std::deque<size_t> queue_;         // runs not started yet, in manifest order
  std::vector<double> run_seconds_;  // wall time of each run finished in this invocation
  SweepOutcome outcome_;
};

}  // namespace

int SweepOutcome::exit_code() const {
  if (signal) return 128 + signal;
  return failed > 0 || damaged > 0 || held > 0 ? 1 : 0;
}

double sweep_eta_seconds(double mean_run_seconds, int64_t queued, const std::vector<double>& active_elapsed,
                         int64_t workers) {
  const int64_t left = queued + int64_t(active_elapsed.size());
  if (left == 0) return 0.0;
  double work = double(queued) * mean_run_seconds;
  for (double e : active_elapsed) work += std::max(0.0, mean_run_seconds - e);
  return work / double(std::min(std::max<int64_t>(1, workers), left));
}

int64_t default_workers(const std::vector<SweepRun>& runs, int64_t gpus, int64_t gpus_per_run) {
  if (gpus > 0) return std::max<int64_t>(1, gpus / std::max<int64_t>(1, gpus_per_run));
  const int64_t cores = usable_cores();
  int64_t threads = 1;
  for (const auto& run : runs) threads = std::max(threads, run.resolved.train.threads > 0 ? run.resolved.train.threads : cores);
  return std::max<int64_t>(1, cores / threads);
}

SweepOutcome run_sweep(const SweepSpec& spec, const std::vector<SweepRun>& runs, const SweepOptions& options) {
  if (options.executable.empty() || !fs::exists(options.executable))
    throw SweepError("sweep: the attnlab binary '" + options.executable.string() + "' does not exist");
  return Pool(spec, runs, options).run();
}

}  // namespace attnlab
