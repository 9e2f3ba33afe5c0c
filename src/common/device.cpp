#include "attnlab/device.h"

#include <sys/sysinfo.h>

#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <torch/cuda.h>

namespace attnlab {

c10::Device resolve_device(const std::string& name, const std::string& option) {
  if (name != "auto" && name != "cpu" && name != "cuda")
    throw std::invalid_argument(option + ": '" + name + "' is not one of auto, cpu, cuda");
  const bool cuda = torch::cuda::is_available();
  if (name == "cpu" || (name == "auto" && !cuda)) return c10::Device(c10::kCPU);
  if (!cuda) throw std::runtime_error(option + ": 'cuda' requested but no CUDA device is available");
  return c10::Device(c10::kCUDA, 0);
}

std::string device_name(const c10::Device& device) {
  if (!device.is_cuda()) return "cpu";
  return at::cuda::getDeviceProperties(device.index())->name;
}

int cuda_compute_capability(const c10::Device& device) {
  if (!device.is_cuda()) return 0;
  const auto* props = at::cuda::getDeviceProperties(device.has_index() ? device.index() : 0);
  return 10 * props->major + props->minor;
}

double peak_flops(const c10::Device& device) {
  if (!device.is_cuda()) return 0.0;
  // Dense bf16 tensor-core peaks from the vendors' data sheets (SXM parts).
  static const std::vector<std::pair<std::string, double>> table = {
      {"H200", 989e12}, {"H100", 989e12}, {"A100", 312e12}, {"L40S", 362e12},
      {"A10", 125e12},  {"4090", 165e12}, {"3090", 71e12},  {"V100", 125e12}};
  const auto name = device_name(device);
  for (const auto& [part, flops] : table)
    if (name.find(part) != std::string::npos) return flops;
  return 0.0;
}

double device_memory_bytes(const c10::Device& device) {
  if (device.is_cuda()) return double(at::cuda::getDeviceProperties(device.index())->totalGlobalMem);
  struct sysinfo info {};
  if (::sysinfo(&info) != 0) return std::numeric_limits<double>::infinity();  // unknown: let the allocator decide
  return (double(info.totalram) + double(info.totalswap)) * double(info.mem_unit);
}

AutocastGuard::AutocastGuard(const c10::Device& device, bool enabled) {
  if (!enabled || !device.is_cuda()) return;
  active_ = true;
  previous_ = at::autocast::is_autocast_enabled(at::kCUDA);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  at::autocast::set_autocast_enabled(at::kCUDA, previous_);
  at::autocast::clear_cache();
}

}  // namespace attnlab
