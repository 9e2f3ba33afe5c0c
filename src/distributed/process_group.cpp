#include "distributed/process_group.h"

#include <optional>
#include <thread>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "common/signals.h"

namespace attnlab::dist::detail {
namespace {

// c10d's messages can run to many lines of context; the first says what happened.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return first_line(c10_error->what_without_backtrace());
  return first_line(e.what());
}

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kConnectSlice = std::chrono::seconds(5);
constexpr auto kFirstLog = std::chrono::seconds(5);
constexpr auto kLogEvery = std::chrono::seconds(30);

DistributedError store_error(const LaunchEnv& env, bool server, std::chrono::milliseconds timeout, const std::exception& e) {
  return DistributedError(fmt::format(
      "rank {} of {}: cannot {} the rendezvous store at MASTER_ADDR:MASTER_PORT = {}:{} within {} s ({}). {}",
      env.rank, env.world_size, server ? "serve" : "reach", env.master_addr, env.master_port, timeout.count() / 1000,
      message_of(e),
      server ? "Is the port free?" : "Is the address right, and did rank 0 (or the launcher) start?"));
}

}  // namespace

std::string job_prefix(int restart_count) { return "attnlab/attempt_" + std::to_string(restart_count); }

c10::intrusive_ptr<c10d::Store> connect_store(const LaunchEnv& env, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = !env.agent_store && env.rank == 0;
  if (!env.agent_store) options.numWorkers = static_cast<size_t>(env.world_size);
  options.waitWorkers = false;  // join_job (rendezvous.h) waits for the ranks, and says for which
  const auto who = fmt::format("rank {} of {}", env.rank, env.world_size);
  const auto start = Clock::now();
  auto next_log = start + kFirstLog;
  c10::intrusive_ptr<c10d::Store> store;
  // A client connects in slices, so that it can say what it waits for and stop on a signal.
  while (!store) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(timeout - (Clock::now() - start));
    options.timeout = std::min<std::chrono::milliseconds>(std::max(left, std::chrono::milliseconds(1)), kConnectSlice);
    const auto tried = Clock::now();
    try {
      store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    } catch (const std::exception& e) {
      if (options.isServer || left <= kConnectSlice) throw store_error(env, options.isServer, timeout, e);
      if (Clock::now() - tried < std::chrono::seconds(1)) std::this_thread::sleep_for(std::chrono::seconds(1));
      if (const int sig = signals::stop_requested())
        throw DistributedError(fmt::format("{}: stopped by signal {} while waiting for the rendezvous store", who, sig));
      if (Clock::now() >= next_log) {
        spdlog::warn("{}: waiting for the rendezvous store at MASTER_ADDR:MASTER_PORT = {}:{}, served by {} ({} s so "
                     "far of at most {} s, --dist-timeout)",
                     who, env.master_addr, env.master_port, env.agent_store ? "the launcher" : "rank 0",
                     std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start).count(),
                     timeout.count() / 1000);
        next_log = Clock::now() + kLogEvery;
      }
    }
  }
  store->setTimeout(timeout);
  return c10::make_intrusive<c10d::PrefixStore>(job_prefix(env.restart_count), store);
}

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                          const LaunchEnv& env, const c10::Device& device,
                                                          std::chrono::milliseconds timeout) {
  const bool cuda = device.is_cuda();
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, env.rank, env.world_size);
  const auto type = cuda ? c10d::ProcessGroup::BackendType::NCCL : c10d::ProcessGroup::BackendType::GLOO;
  c10::intrusive_ptr<c10d::Backend> backend;
  guarded(fmt::format("rank {} of {}", env.rank, env.world_size), cuda ? "creating the NCCL backend" : "creating the Gloo backend", [&] {
    backend = cuda ? make_nccl_backend(store, env.rank, env.world_size, timeout)
                   : make_gloo_backend(store, env.rank, env.world_size, timeout);
  });
  group->setBackend(device.type(), type, backend);
  group->setDefaultBackend(type);
  group->setGroupName("0");  // torch.distributed's name for the default group
  return group;
}

void guarded(const std::string& who, const std::string& what, const std::function<void()>& op) {
  try {
    op();
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistributedError(fmt::format(
        "{}: {} failed: {}. Another rank has most likely exited (its own error is in its log) or stalled for "
        "longer than the collective timeout (train --dist-timeout)", who, what, message_of(e)));
  }
}

}  // namespace attnlab::dist::detail
