// DataParallel (include/attnlab/distributed.h): joining a job, the backward pass with the Reducer,
// and the few collectives the trainer needs, each failure turned into a DistributedError naming the rank.
#include <sys/prctl.h>
#include <unistd.h>

#include <signal.h>

#include <csignal>

#include <c10/cuda/CUDAFunctions.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "attnlab/distributed.h"
#include "common/json_read.h"
#include "distributed/job_wait.h"
#include "distributed/liveness.h"
#include "distributed/process_group.h"
#include "distributed/rendezvous.h"

namespace attnlab::dist {

struct DataParallel::Impl {
  LaunchEnv env;
  c10::Device device{c10::kCPU};
  c10::intrusive_ptr<c10d::Store> store;
  std::unique_ptr<detail::Heartbeat> heartbeat;  // this rank's, for the job's life
  std::unique_ptr<detail::PulseWatch> pulse;     // the others'
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  std::unique_ptr<c10d::Reducer> reducer;
  std::string who;  // "rank 1 of 4", the prefix of every error
  int64_t main_writes = 0;  // run_on_main calls so far: each one's key in the store

  void run(const std::string& what, const std::function<void()>& op) const { detail::guarded(who, what, op); }

  // Waits, as long as rank 0 lives (its heartbeat), until `key` is in the store.
  void wait_for_rank0(const std::string& key, const std::string& during, const std::string& progress) {
    detail::WaitSpec spec;
    spec.who = who;
    spec.during = during;
    spec.done = [&] { return store->check({key}); };
    spec.awaited = [] { return std::vector<int>{0}; };
    spec.progress = [&] { return progress; };
    detail::wait_for(*store, *pulse, spec);
  }

  // Each parameter that is not bit for bit rank 0's on some rank, and on how many (the same on every rank).
  std::vector<std::string> parameter_differences(torch::nn::Module& model) {
    std::vector<std::string> names, out;
    std::vector<at::Tensor> tensors;
    for (const auto& item : model.named_parameters()) {
      names.push_back(item.key());
      tensors.push_back(item.value());
    }
    std::vector<int64_t> differing;
    run("comparing the ranks' parameters", [&] { differing = detail::count_differing_tensors(*group, device, tensors); });
    for (size_t i = 0; i < names.size(); ++i)
      if (differing[i] > 0) out.push_back(fmt::format("parameter {} ({} rank(s) differ from rank 0)", names[i], differing[i]));
    return out;
  }

  // Rank 0's facts, through the store (a JSON text of any length): the others wait for them as long as
  // rank 0 lives, since claiming the run directory and reading a checkpoint may take it long.
  nlohmann::json facts_of_rank0(const nlohmann::json& facts) {
    const std::string key = "start/facts";
    if (env.rank == 0) {
      run("publishing rank 0's start", [&] { store->set(key, facts.dump()); });
      return facts;
    }
    wait_for_rank0(key, "before the first step", "waiting for rank 0 to claim the run directory and read its checkpoint");
    std::string text;
    run("reading rank 0's start", [&] {
      const auto bytes = store->get(key);
      text.assign(bytes.begin(), bytes.end());
    });
    return attnlab::detail::parse_json(text);
  }
};

namespace {

// What every rank can say of the facts that differ: rank 0's value (a scalar's), and how many ranks differ.
std::vector<std::string> count_lines(const nlohmann::json& rank0, const std::vector<std::string>& names,
                                     const std::vector<int64_t>& differing) {
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (differing[i] == 0) continue;
    const auto& value = rank0[names[i]];
    out.push_back(value.is_structured()
                      ? fmt::format("{}: {} rank(s) differ from rank 0", names[i], differing[i])
                      : fmt::format("{}: rank 0 has {}, {} rank(s) differ", names[i], value.dump(), differing[i]));
  }
  return out;
}

// `train --nproc` (local_launcher.h): a SIGTERM when the launcher dies, as if it had forwarded one, so
// that its ranks stop with it (a checkpoint at the next step) instead of training on as orphans.
void end_with_launcher(int launcher_pid) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != launcher_pid) ::kill(::getpid(), SIGTERM);  // it died before the line above
}

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
  if (env.launcher_pid > 0) end_with_launcher(env.launcher_pid);
  // A write to the socket of a rank that died must fail the collective with a message, not end this
  // process silently with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  if (env.rank != 0) spdlog::set_level(spdlog::level::warn);  // rank 0 speaks for the job
  if (device.is_cuda()) device = device_of_rank(env);
  impl_->device = device;
  impl_->store = detail::connect_store(env, timeout);
  impl_->heartbeat = std::make_unique<detail::Heartbeat>(impl_->store, env.rank);  // before joining: a joined rank beats
  impl_->pulse = std::make_unique<detail::PulseWatch>(*impl_->store, detail::silence_limit(timeout));
  detail::join_job(*impl_->store, env, timeout, *impl_->pulse);
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

void DataParallel::verify_identical(torch::nn::Module& model, const nlohmann::json& facts) {
  if (!joined()) return;
  const std::string advice =
      "Every rank must run the same command (config, --set, --stop-after, --branch-from) and seed, and see the "
      "same run directory (on several machines, a shared filesystem)";
  // The facts first: ranks with different configs may not even have parameters of the same shapes.
  const auto rank0 = impl_->facts_of_rank0(facts);
  std::vector<std::string> names, mine;  // mine: how this rank differs, named
  std::vector<int64_t> flags;
  for (const auto& [name, value] : rank0.items()) {
    names.push_back(name);
    const auto differences = detail::fact_differences(name, facts.contains(name) ? facts[name] : nlohmann::json(), value);
    flags.push_back(differences.empty() ? 0 : 1);
    mine.insert(mine.end(), differences.begin(), differences.end());
  }
  std::vector<int64_t> differing;
  impl_->run("comparing the ranks' start", [&] { differing = detail::count_over_ranks(*impl_->group, impl_->device, flags); });
  auto counts = count_lines(rank0, names, differing);          // the same on every rank
  if (counts.empty()) counts = impl_->parameter_differences(model);  // likewise
  if (counts.empty()) return;
  throw DistributedError(fmt::format(
      "{}: refusing to train, the ranks do not start from the same state: {}. {}", impl_->who,
      mine.empty() ? fmt::format("{}", fmt::join(counts, "; "))
                   : fmt::format("{} (in all: {})", fmt::join(mine, "; "), fmt::join(counts, "; ")),
      advice));
}

void DataParallel::run_on_main(const std::string& what, const std::function<void()>& write) {
  if (!joined()) return write();
  const std::string key = fmt::format("main/{}", impl_->main_writes++);
  if (is_main()) {
    try {
      write();
    } catch (const std::exception&) {
      // The others stop waiting; a rank 0 that serves the store lets them read the note before it exits.
      const bool serves_store = !impl_->env.agent_store;
      detail::note_failure(*impl_->store, "rank 0 failed to write " + what, serves_store ? world_size() - 1 : 0);
      throw;
    }
    try {
      impl_->store->set(key, std::string("done"));
    } catch (const std::exception&) {
      // The store is gone with its server (the launcher, killed): the barrier below still holds every rank.
    }
  } else {
    try {
      impl_->wait_for_rank0(key, "while rank 0 wrote " + what, "waiting for rank 0 to finish writing " + what);
    } catch (const detail::StoreLost&) {
      spdlog::warn("{}: the job's store is gone (its server, the launcher, has most likely exited); waiting for rank 0 "
                   "to write {} at a barrier, for at most the collective timeout", impl_->who, what);
    }
    try {
      if (impl_->store->add(key + "/read", 1) == world_size() - 1) {  // the last reader clears both keys
        impl_->store->deleteKey(key);
        impl_->store->deleteKey(key + "/read");
      }
    } catch (const std::exception&) {
      // Keys of a store that is gone need no clearing.
    }
  }
  barrier();  // on every rank, every time, so the ranks leave together whichever way they waited
}

uint64_t DataParallel::collectives_issued() const {
  return joined() ? impl_->group->getBackend(impl_->device.type())->getSequenceNumberForGroup() : 0;
}

void DataParallel::barrier() {
  // An all-reduce rather than c10d's barrier, which on NCCL must guess each rank's device.
  if (joined()) sum({0.0});
}

}  // namespace attnlab::dist
