// Capture and restore of the global random generators, so a resumed run draws the same numbers
// (dropout masks, sampled batches, anything seeded once at start-up) as an uninterrupted one.
#include <ATen/Context.h>
#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <cstring>

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

size_t cuda_devices() { return torch::cuda::is_available() ? torch::cuda::device_count() : 0; }

template <class T>
T load_at(const std::vector<uint8_t>& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

/// The CPU state's mt19937 position must stay inside its 624-word table: LibTorch copies `left`
/// (int32 at byte 8) and `next` (uint64 at byte 16) of CPUGeneratorImplStateLegacy
/// (ATen/CPUGeneratorImpl.cpp) without a check, and draws state[next], state[next + 1], ... until
/// `left` counts down to 0, so left < 1 or next + left > 625 would read past the table.
void check_mt19937_position(const std::vector<uint8_t>& cpu, const std::filesystem::path& origin) {
  const auto left = load_at<int32_t>(cpu, 8);
  const auto next = load_at<uint64_t>(cpu, 16);
  if (left < 1 || next > 624 || next + static_cast<uint64_t>(left) > 625) {
    throw CheckpointError(origin, "the CPU RNG state's mt19937 position (left " + std::to_string(left) + ", next " +
                                      std::to_string(next) + ") lies outside its 624-word table");
  }
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

void check_rng_states(const RngStates& states, const std::filesystem::path& origin) {
  const size_t cpu_bytes = state_bytes(at::detail::getDefaultCPUGenerator()).size();
  if (states.cpu.size() != cpu_bytes) {
    throw CheckpointError(origin, "the CPU RNG state is " + std::to_string(states.cpu.size()) +
                                      " bytes, this build's " + std::to_string(cpu_bytes));
  }
  check_mt19937_position(states.cpu, origin);
  for (size_t i = 0; i < std::min(cuda_devices(), states.cuda.size()); ++i) {
    const size_t bytes = state_bytes(cuda_generator(i)).size();
    if (states.cuda[i].size() != bytes) {
      throw CheckpointError(origin, "the RNG state of CUDA device " + std::to_string(i) + " is " +
                                        std::to_string(states.cuda[i].size()) + " bytes, this build's " +
                                        std::to_string(bytes));
    }
  }
}

void restore_rng_states(const RngStates& states, const std::filesystem::path& origin) {
  check_rng_states(states, origin);
  try {
    set_state_bytes(at::detail::getDefaultCPUGenerator(), states.cpu);
    const size_t devices = cuda_devices();
    if (states.cuda.size() != devices && !states.cuda.empty()) {
      spdlog::warn("{}: {} CUDA generator states saved, {} devices here; restoring the common ones",
                   origin.string(), states.cuda.size(), devices);
    }
    for (size_t i = 0; i < std::min(devices, states.cuda.size()); ++i) set_state_bytes(cuda_generator(i), states.cuda[i]);
  } catch (const c10::Error& e) {  // whatever else the generator refuses
    throw CheckpointError(origin, std::string("cannot restore an RNG state: ") + e.what_without_backtrace());
  }
}

}  // namespace attnlab
