// Whether every rank holds rank 0's values: the start-of-training check that the ranks resumed the
// same step of the same config and hold bit-identical parameters.
#include <torch/torch.h>

#include "distributed/process_group.h"

namespace attnlab::dist::detail {
namespace {

// Element-wise sum over ranks of 0/1 flags (int64 on the job's device).
std::vector<int64_t> count_over_ranks(c10d::ProcessGroup& group, const c10::Device& device,
                                      const std::vector<int64_t>& flags) {
  std::vector<at::Tensor> tensors = {torch::tensor(flags, torch::kLong).to(device)};
  group.allreduce(tensors)->wait();
  const auto counts = tensors[0].cpu();
  return {counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel()};
}

}  // namespace

Comparison compare_with_rank0(c10d::ProcessGroup& group, const c10::Device& device, const std::vector<int64_t>& values) {
  std::vector<at::Tensor> tensors = {torch::tensor(values, torch::kLong).to(device)};
  group.broadcast(tensors)->wait();  // root rank 0
  const auto rank0_tensor = tensors[0].cpu();
  Comparison out;
  out.rank0.assign(rank0_tensor.data_ptr<int64_t>(), rank0_tensor.data_ptr<int64_t>() + rank0_tensor.numel());
  std::vector<int64_t> flags(values.size());
  for (size_t i = 0; i < values.size(); ++i) flags[i] = values[i] != out.rank0[i];
  out.differing = count_over_ranks(group, device, flags);
  return out;
}

std::vector<int64_t> count_differing_tensors(c10d::ProcessGroup& group, const c10::Device& device,
                                             const std::vector<at::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> flags(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<at::Tensor> copy = {tensors[i].detach().clone()};
    group.broadcast(copy)->wait();
    flags[i] = !torch::equal(copy[0], tensors[i]);  // exact: NaNs never compare equal, and would be refused
  }
  return count_over_ranks(group, device, flags);
}

}  // namespace attnlab::dist::detail
