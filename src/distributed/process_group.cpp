#include "distributed/process_group.h"

#include <optional>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace attnlab::dist::detail {
namespace {

// c10d's messages can run to many lines of context; the first says what happened.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return first_line(c10_error->what_without_backtrace());
  return first_line(e.what());
}

}  // namespace

c10::intrusive_ptr<c10d::Store> connect_store(const LaunchEnv& env, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = !env.agent_store && env.rank == 0;
  // Without a launcher's store, the server waits until every rank has connected (torch.distributed's
  // env:// rendezvous); with one, the launcher already counts its children.
  if (!env.agent_store) options.numWorkers = static_cast<size_t>(env.world_size);
  options.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& e) {
    throw DistributedError(fmt::format(
        "rank {} of {}: cannot {} the rendezvous store at MASTER_ADDR:MASTER_PORT = {}:{} within {} s ({}). {}",
        env.rank, env.world_size, options.isServer ? "serve" : "reach", env.master_addr, env.master_port,
        timeout.count() / 1000, message_of(e),
        options.isServer ? "Is the port free, and did every rank start?"
                         : "Is the address right, and did rank 0 (or the launcher) start?"));
  }
  return c10::make_intrusive<c10d::PrefixStore>("attnlab/attempt_" + std::to_string(env.restart_count), store);
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
