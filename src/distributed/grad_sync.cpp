// The gradient all-reduce: c10d's Reducer, as torch.nn.parallel.DistributedDataParallel builds it.
#include <algorithm>

#include "distributed/process_group.h"

namespace attnlab::dist::detail {
namespace {
// DDP's defaults (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES and bucket_cap_mb = 25).
constexpr int64_t kFirstBucketBytes = c10d::kDefaultFirstBucketBytes;
constexpr int64_t kBucketBytes = c10d::kDefaultBucketBytesCap;
}  // namespace

std::unique_ptr<c10d::Reducer> make_reducer(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                            const std::vector<std::pair<std::string, at::Tensor>>& params) {
  std::vector<at::Tensor> tensors;
  std::unordered_map<size_t, std::string> names;  // named in the Reducer's own error messages
  for (const auto& [name, tensor] : params) {
    names[tensors.size()] = name;
    tensors.push_back(tensor);
  }
  const std::vector<bool> dense(tensors.size(), false);
  auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
      tensors, {static_cast<size_t>(kFirstBucketBytes), static_cast<size_t>(kBucketBytes)}, dense);
  std::reverse(buckets.begin(), buckets.end());
  return std::make_unique<c10d::Reducer>(std::move(tensors), std::move(buckets), group, dense, kBucketBytes,
                                         /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false,
                                         std::move(names), kFirstBucketBytes,
                                         /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
                                         /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
}

}  // namespace attnlab::dist::detail
