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

#include "attnlab/distributed.h"

namespace attnlab::dist::detail {

/// Connects to the job's store (a client of the launcher's store, or served by rank 0), under a
/// prefix per restart so a restarted job never reads its predecessor's keys. Throws
/// DistributedError naming MASTER_ADDR:MASTER_PORT when it cannot be reached within `timeout`.
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

/// Rank 0's copy of `values` (broadcast), and for each value how many ranks hold another.
struct Comparison {
  std::vector<int64_t> rank0;     ///< rank 0's values
  std::vector<int64_t> differing;  ///< per value: the number of ranks whose value is not rank 0's
};
Comparison compare_with_rank0(c10d::ProcessGroup& group, const c10::Device& device, const std::vector<int64_t>& values);

/// Per tensor: the number of ranks whose tensor is not bit for bit rank 0's (which is broadcast,
/// one tensor at a time). The tensors must have the same shapes and dtypes on every rank.
std::vector<int64_t> count_differing_tensors(c10d::ProcessGroup& group, const c10::Device& device,
                                             const std::vector<at::Tensor>& tensors);

/// Runs `op`; a c10d failure becomes a DistributedError that names this rank and `what`, and says
/// that another rank has most likely exited (its own error is above) or stalled past the timeout.
void guarded(const std::string& who, const std::string& what, const std::function<void()>& op);

}  // namespace attnlab::dist::detail
