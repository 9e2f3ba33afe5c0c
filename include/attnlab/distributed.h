// Data-parallel training on torch.distributed's c10d (docs/distributed.md): one run over many
// processes (one per GPU, or CPU processes with Gloo), with the numbers of a single process.
//
// A process joins a job when the torchrun environment names one (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT: torchrun, srun with the emitted Slurm script, or `attnlab train
// --nproc N`). The collectives are c10d's: a TCPStore for the rendezvous, ProcessGroupNCCL on CUDA
// (one device per LOCAL_RANK), ProcessGroupGloo on CPU, and the gradient all-reduce is DDP's c10d
// Reducer (buckets launched while the backward pass still runs).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/nn/module.h>

namespace attnlab {
struct RunConfig;
}

namespace attnlab::dist {

/// A job that cannot start or cannot go on: an incomplete launch environment, a rendezvous that
/// timed out, ranks that disagree on the model or the checkpoint, a collective that failed because
/// another rank exited or stalled. The message names the rank and says what to check.
struct DistributedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Where this process sits in a job: torchrun's variables.
struct LaunchEnv {
  int rank = 0;        ///< RANK, in [0, world_size)
  int world_size = 1;  ///< WORLD_SIZE, >= 1
  int local_rank = 0;  ///< LOCAL_RANK: the CUDA device this process uses on its machine
  std::string master_addr;  ///< MASTER_ADDR: host of the rendezvous store
  int master_port = 0;      ///< MASTER_PORT, in [1, 65535]
  /// TORCHELASTIC_USE_AGENT_STORE=True: the launcher (torchrun's agent or `attnlab train --nproc`)
  /// serves the store, and every rank connects to it as a client; otherwise rank 0 serves it.
  bool agent_store = false;
  int restart_count = 0;  ///< TORCHELASTIC_RESTART_COUNT: keys of a restarted job never meet stale ones
  /// ATTNLAB_LAUNCHER_PID, set by `train --nproc` (local_launcher.h): the rank gets a SIGTERM when
  /// that process dies (PR_SET_PDEATHSIG), so a killed launcher leaves no rank training on; 0: none.
  int launcher_pid = 0;
};

/// The launch environment, or std::nullopt when none of RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
/// MASTER_PORT is set (a plain single-process run). Throws DistributedError naming the variable when
/// some are set and others not, or a value is not an integer in range.
std::optional<LaunchEnv> launch_env_from_environment();

/// Micro-batches each rank runs per optimizer step: G / (world_size * batch_size) for the global
/// batch of G = tokens_per_step / seq_len sequences. Throws DistributedError naming
/// train.tokens_per_step, train.batch_size, train.seq_len and the world size when they do not divide.
int64_t micro_batches_per_rank(const RunConfig& cfg, int world_size);

/// One process's membership of a data-parallel job, and the few collectives training needs. The
/// default object is a world of one: no process group, and every collective returns its input.
/// Every collective must be called by every rank in the same order (c10d's contract); a failure
/// (another rank exited, or stalled past the timeout) throws DistributedError.
class DataParallel {
 public:
  DataParallel();
  /// Joins the job `env` describes: connects to the store, then builds NCCL when `device` is CUDA
  /// (it becomes cuda:LOCAL_RANK) or Gloo on CPU. `timeout` bounds the rendezvous and every
  /// collective, so a stalled rank ends the job instead of hanging it. Ranks other than 0 log only
  /// warnings and errors.
  DataParallel(const LaunchEnv& env, c10::Device& device, std::chrono::milliseconds timeout);
  /// A world of one, or the job launch_env_from_environment() names.
  static DataParallel from_environment(c10::Device& device, std::chrono::milliseconds timeout);
  ~DataParallel();
  DataParallel(DataParallel&&) noexcept;
  DataParallel& operator=(DataParallel&&) noexcept;

  int rank() const;
  int world_size() const;
  bool is_main() const { return rank() == 0; }  ///< the rank that writes the run directory
  bool joined() const;                           ///< a process group exists (even of one rank)
  std::string describe() const;                  ///< "rank 1 of 4 (nccl)", or "single process"

  /// Registers the c10d Reducer on `model`'s parameters (buckets of 25 MiB, the first 1 MiB, in
  /// reverse registration order as DDP does). Call once, after the model is on its device.
  void attach(torch::nn::Module& model);

  /// loss.backward() for one micro-batch. With `reduce` (the last micro-batch of a step) the
  /// Reducer averages the accumulated gradients over ranks, bucket by bucket as they become ready;
  /// otherwise gradients only accumulate locally (DDP's no_sync). After the last micro-batch every
  /// rank holds the mean over ranks of its accumulated gradients.
  void backward(const at::Tensor& loss, bool reduce);

  /// Element-wise sum over ranks (float64 on the job's device).
  std::vector<double> sum(std::vector<double> values);
  /// The largest value over ranks (e.g. the stop signal one rank received).
  int64_t max(int64_t value);
  /// Waits for every rank (e.g. until rank 0 has written its checkpoint).
  void barrier();
  /// Runs `write` on rank 0 alone (a checkpoint, final.json); every rank returns once it has
  /// finished. The others wait outside any collective, for as long as rank 0 is alive (its heartbeat:
  /// a slow disk can make a write outlast --dist-timeout, and the files it leaves are complete),
  /// saying in their log after 5 s and every 30 s that they wait and for what (`what`: "the
  /// checkpoint of step 200"). Call it on every rank at the same point. Rethrows on rank 0 what
  /// `write` throws; the others then throw DistributedError saying that rank 0 failed to write
  /// `what`, as they do when rank 0's heartbeat stops. Every rank then meets at a barrier, so the
  /// ranks leave together even when the store is gone (its server, a killed launcher, took it):
  /// then the others wait at that barrier, for at most the collective timeout. A world of one just
  /// runs `write`.
  void run_on_main(const std::string& what, const std::function<void()>& write);
  /// Collectives this rank's process group has issued so far (c10d's sequence number; 0 for a world
  /// of one): tests count the gradient all-reduces with it.
  uint64_t collectives_issued() const;

  /// Refuses to train unless every rank holds rank 0's values: every fact of `facts`, a JSON object
  /// whose keys name them ({"resume step": 200, "--stop-after": 0, "config": <to_json(cfg)>, ...}:
  /// everything that must agree across ranks, options included, or the ranks would run different
  /// collectives), and every parameter of `model` bit for bit (rank 0's copy is broadcast and
  /// compared). Rank 0's facts reach the others through the store, and they wait for them as long
  /// as rank 0 lives (it may take long to claim the run directory and read a checkpoint). Throws
  /// DistributedError on every rank when any rank differs: on a differing rank naming each
  /// difference, an object's by key path ("config optim.lr: rank 0 has 0.003, this rank 0.001"), on
  /// the others naming the facts and how many ranks differ.
  void verify_identical(torch::nn::Module& model, const nlohmann::json& facts);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnlab::dist
