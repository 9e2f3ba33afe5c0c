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

template <>
const NameTable<DeviceChoice>& name_table<DeviceChoice>() {
  static const NameTable<DeviceChoice> table(
      "device", {{DeviceChoice::automatic, "auto"}, {DeviceChoice::cpu, "cpu"}, {DeviceChoice::cuda, "cuda"}});
  return table;
}

std::string to_string(DeviceChoice choice) { return name_table<DeviceChoice>().name(choice); }

c10::Device resolve_device(DeviceChoice choice, const std::string& option) {
  const bool cuda = torch::cuda::is_available();
  if (choice == DeviceChoice::cpu || (choice == DeviceChoice::automatic && !cuda)) return c10::Device(c10::kCPU);
  if (!cuda) throw std::runtime_error(option + ": 'cuda' requested but no CUDA device is available");
  return c10::Device(c10::kCUDA, 0);
}

c10::Device resolve_device(const std::string& name, const std::string& option) {
  return resolve_device(name_table<DeviceChoice>().parse(name, option), option);
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
