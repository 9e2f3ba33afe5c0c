// Capture and restore of the global random generators, so a resumed run draws the same numbers
// (dropout masks, sampled batches, anything seeded once at start-up) as an uninterrupted one.
#include <ATen/Context.h>
#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include "attnlab/checkpoint.h"

namespace attnlab {
namespace {

std::vector<uint8_t> state_bytes(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());  // generators are shared by every thread
  const at::Tensor state = gen.get_state();       // uint8 CPU tensor
  const auto* p = state.data_ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + state.numel());
}

void set_state_bytes(at::Generator gen, const std::vector<uint8_t>& bytes) {
  at::Tensor state = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::copy(bytes.begin(), bytes.end(), state.data_ptr<uint8_t>());
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

at::Generator cuda_generator(size_t device) {
  return at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
}

}  // namespace

RngStates capture_rng_states() {
  RngStates states;
  states.cpu = state_bytes(at::detail::getDefaultCPUGenerator());
  if (torch::cuda::is_available()) {
    for (size_t i = 0; i < torch::cuda::device_count(); ++i) states.cuda.push_back(state_bytes(cuda_generator(i)));
  }
  return states;
}

void restore_rng_states(const RngStates& states, const std::filesystem::path& origin) {
  try {
    set_state_bytes(at::detail::getDefaultCPUGenerator(), states.cpu);
    const size_t devices = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
    if (states.cuda.size() != devices && !states.cuda.empty()) {
      spdlog::warn("{}: {} CUDA generator states saved, {} devices here; restoring the common ones",
                   origin.string(), states.cuda.size(), devices);
    }
    for (size_t i = 0; i < std::min(devices, states.cuda.size()); ++i) set_state_bytes(cuda_generator(i), states.cuda[i]);
  } catch (const c10::Error& e) {  // a state of the wrong size for its generator
    throw CheckpointError(origin, std::string("cannot restore an RNG state: ") + e.what_without_backtrace());
  }
}

}  // namespace attnlab
