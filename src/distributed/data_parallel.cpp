// DataParallel (include/attnlab/distributed.h): joining a job, the backward pass with the Reducer,
// and the few collectives the trainer needs, each failure turned into a DistributedError naming the rank.
#include <csignal>

#include <c10/cuda/CUDAFunctions.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "attnlab/distributed.h"
#include "distributed/process_group.h"

namespace attnlab::dist {

struct DataParallel::Impl {
  LaunchEnv env;
  c10::Device device{c10::kCPU};
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  std::unique_ptr<c10d::Reducer> reducer;
  std::string who;  // "rank 1 of 4", the prefix of every error

  void run(const std::string& what, const std::function<void()>& op) const { detail::guarded(who, what, op); }
};

namespace {

// cuda:LOCAL_RANK, refusing a LOCAL_RANK that names no visible device (no silent sharing of GPU 0).
c10::Device device_of_rank(const LaunchEnv& env) {
  const int count = static_cast<int>(c10::cuda::device_count());
  if (env.local_rank >= count) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw DistributedError(fmt::format(
        "rank {} of {}: LOCAL_RANK={} but this process sees {} CUDA device(s) (CUDA_VISIBLE_DEVICES={}): every "
        "rank on a machine must see that machine's GPUs (under Slurm, --gpus-per-node without per-task binding)",
        env.rank, env.world_size, env.local_rank, count, visible ? visible : "unset"));
  }
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(env.local_rank));
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
}

}  // namespace

DataParallel::DataParallel() : impl_(std::make_unique<Impl>()) { impl_->who = "single process"; }

DataParallel::DataParallel(const LaunchEnv& env, c10::Device& device, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->env = env;
  impl_->who = fmt::format("rank {} of {}", env.rank, env.world_size);
  // A write to the socket of a rank that died must fail the collective with a message, not end this
  // process silently with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  if (env.rank != 0) spdlog::set_level(spdlog::level::warn);  // rank 0 speaks for the job
  if (device.is_cuda()) device = device_of_rank(env);
  impl_->device = device;
  impl_->store = detail::connect_store(env, timeout);
  impl_->group = detail::make_process_group(impl_->store, env, device, timeout);
  spdlog::info("distributed: {} ranks, {} backend, rendezvous {}:{}{}", env.world_size,
               device.is_cuda() ? "NCCL" : "Gloo", env.master_addr, env.master_port,
               env.agent_store ? " (launcher's store)" : "");
}

DataParallel DataParallel::from_environment(c10::Device& device, std::chrono::milliseconds timeout) {
  const auto env = launch_env_from_environment();
  return env ? DataParallel(*env, device, timeout) : DataParallel();
}

DataParallel::~DataParallel() = default;
DataParallel::DataParallel(DataParallel&&) noexcept = default;
DataParallel& DataParallel::operator=(DataParallel&&) noexcept = default;

int DataParallel::rank() const { return impl_->env.rank; }
int DataParallel::world_size() const { return impl_->env.world_size; }
bool DataParallel::joined() const { return impl_->group.defined(); }

std::string DataParallel::describe() const {
  if (!joined()) return impl_->who;
  return fmt::format("{} ({})", impl_->who, impl_->device.is_cuda() ? "nccl" : "gloo");
}

void DataParallel::attach(torch::nn::Module& model) {
  if (!joined()) return;
  std::vector<std::pair<std::string, at::Tensor>> params;
  for (const auto& item : model.named_parameters()) params.emplace_back(item.key(), item.value());
  impl_->run("setting up the gradient all-reduce", [&] { impl_->reducer = detail::make_reducer(impl_->group, params); });
}

void DataParallel::backward(const at::Tensor& loss, bool reduce) {
  if (!impl_->reducer || !reduce) {
    loss.backward();  // accumulate locally (all but the last micro-batch: DDP's no_sync)
    return;
  }
  impl_->run("the gradient all-reduce", [&] {
    impl_->reducer->rebuild_buckets();  // once, after the first step: buckets in gradient-arrival order
    impl_->reducer->prepare_for_backward({loss});
    loss.backward();
  });
}

std::vector<double> DataParallel::sum(std::vector<double> values) {
  if (!joined() || values.empty()) return values;
  std::vector<at::Tensor> tensors = {torch::tensor(values, torch::kDouble).to(impl_->device)};
  impl_->run("an all-reduce", [&] { impl_->group->allreduce(tensors)->wait(); });
  const auto total = tensors[0].cpu();
  for (size_t i = 0; i < values.size(); ++i) values[i] = total[static_cast<int64_t>(i)].item<double>();
  return values;
}

int64_t DataParallel::max(int64_t value) {
  if (!joined()) return value;
  std::vector<at::Tensor> tensors = {torch::tensor({value}, torch::kLong).to(impl_->device)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  impl_->run("an all-reduce", [&] { impl_->group->allreduce(tensors, options)->wait(); });
  return tensors[0].cpu().item<int64_t>();
}

void DataParallel::verify_identical(torch::nn::Module& model,
                                    const std::vector<std::pair<std::string, int64_t>>& facts) {
  if (!joined()) return;
  const std::string advice =
      "Every rank must run the same config and seed, and see the same run directory (on several machines, "
      "a shared filesystem)";
  // The facts first: ranks with different configs may not even have parameters of the same shapes.
  std::vector<int64_t> values;
  for (const auto& fact : facts) values.push_back(fact.second);
  detail::Comparison facts_seen;
  impl_->run("comparing the ranks' start", [&] { facts_seen = detail::compare_with_rank0(*impl_->group, impl_->device, values); });
  std::vector<std::string> problems;
  for (size_t i = 0; i < facts.size(); ++i) {
    if (facts_seen.differing[i] == 0) continue;
    problems.push_back(fmt::format("{}: rank 0 has {}, this rank {} ({} rank(s) differ)", facts[i].first,
                                   facts_seen.rank0[i], values[i], facts_seen.differing[i]));
  }
  if (problems.empty()) {
    std::vector<std::string> names;
    std::vector<at::Tensor> tensors;
    for (const auto& item : model.named_parameters()) {
      names.push_back(item.key());
      tensors.push_back(item.value());
    }
    std::vector<int64_t> differing;
    impl_->run("comparing the ranks' parameters",
               [&] { differing = detail::count_differing_tensors(*impl_->group, impl_->device, tensors); });
    for (size_t i = 0; i < names.size(); ++i) {
      if (differing[i] > 0) problems.push_back(fmt::format("parameter {} ({} rank(s) differ from rank 0)", names[i], differing[i]));
    }
  }
  if (!problems.empty()) {
    throw DistributedError(fmt::format("{}: refusing to train, the ranks do not start from the same state: {}. {}",
                                       impl_->who, fmt::join(problems, "; "), advice));
  }
}

uint64_t DataParallel::collectives_issued() const {
  return joined() ? impl_->group->getBackend(impl_->device.type())->getSequenceNumberForGroup() : 0;
}

void DataParallel::barrier() {
  // An all-reduce rather than c10d's barrier, which on NCCL must guess each rank's device.
  if (joined()) sum({0.0});
}

}  // namespace attnlab::dist
