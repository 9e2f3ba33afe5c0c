// c10d plumbing behind DataParallel (include/attnlab/distributed.h): the rendezvous store and the
// per-device backends. Kept out of the public header: c10d's headers are heavy, and Gloo's need the
// gloo headers of libgloo-dev (LibTorch's wheel ships none).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <nlohmann/json.hpp>

#include "attnlab/distributed.h"

namespace attnlab::dist::detail {

/// The prefix of a job's keys in its store ("attnlab/attempt_<restart_count>"): a restarted job
/// never reads its predecessor's keys. The launcher writes its notes under it too.
std::string job_prefix(int restart_count);

/// Connects to the job's store (a client of the launcher's store, or served by rank 0, which does not
/// wait for the others here: join_job does), under job_prefix(). A client that cannot connect yet
/// says so in the log after 5 s and every 30 s. Throws DistributedError naming
/// MASTER_ADDR:MASTER_PORT when it cannot be served or reached within `timeout`, and on SIGINT /
/// SIGTERM while waiting.
c10::intrusive_ptr<c10d::Store> connect_store(const LaunchEnv& env, std::chrono::milliseconds timeout);

/// A c10d process group of `env`'s ranks whose backend serves `device`'s type: Gloo for CPU,
/// NCCL for CUDA. Throws DistributedError when this build has no such backend.
c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                          const LaunchEnv& env, const c10::Device& device,
                                                          std::chrono::milliseconds timeout);

/// The backends, one file each because each needs its library's headers. They throw
/// DistributedError saying how to get a build with them when compiled without.
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout);
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout);

/// DDP's gradient Reducer over `params` (dense, all used every step): buckets of 25 MiB (the first
/// 1 MiB, so communication starts early), in reverse registration order, since the backward pass
/// produces the last layers' gradients first. Each bucket's all-reduce is launched as soon as all
/// its gradients are ready, while the backward pass goes on.
std::unique_ptr<c10d::Reducer> make_reducer(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                            const std::vector<std::pair<std::string, at::Tensor>>& params);

/// Element-wise sum over ranks of 0/1 `flags` (the same count on every rank): how many ranks raised each.
std::vector<int64_t> count_over_ranks(c10d::ProcessGroup& group, const c10::Device& device,
                                      const std::vector<int64_t>& flags);

/// How this rank's value of the start fact `name` differs from rank 0's, one line per difference:
/// "--stop-after: rank 0 has 2, this rank 3", or for an object by key path, "config optim.lr: rank 0
/// has 0.003, this rank 0.001" ("none" for a key one side lacks); at most 10, then a count. Empty when
/// they are equal.
std::vector<std::string> fact_differences(const std::string& name, const nlohmann::json& mine,
                                          const nlohmann::json& rank0);

/// Per tensor: the number of ranks whose tensor is not bit for bit rank 0's (which is broadcast,
/// one tensor at a time). The tensors must have the same shapes and dtypes on every rank.
std::vector<int64_t> count_differing_tensors(c10d::ProcessGroup& group, const c10::Device& device,
                                             const std::vector<at::Tensor>& tensors);

/// Runs `op`; a c10d failure becomes a DistributedError that names this rank and `what`, and says
/// that another rank has most likely exited (its own error is above) or stalled past the timeout.
void guarded(const std::string& who, const std::string& what, const std::function<void()>& op);

}  // namespace attnlab::dist::detail
