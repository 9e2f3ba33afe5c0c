// Device choice, bf16 autocast and per-device peak FLOP/s for MFU (SPEC section 2: bf16 autocast on GPU).
#pragma once

#include <string>

#include <c10/core/Device.h>

#include "attnlab/name_table.h"

namespace attnlab {

/// Where a run or an analysis asks to run (config key `train.device`, the --device flags).
enum class DeviceChoice {
  automatic,  ///< "auto": CUDA when available, else the CPU
  cpu,
  cuda,
};

/// auto | cpu | cuda.
template <> const NameTable<DeviceChoice>& name_table<DeviceChoice>();
std::string to_string(DeviceChoice choice);

/// The device `choice` means here: cuda:0 for cuda (and for auto when CUDA is available), else the
/// CPU. `option` names where the choice came from (a flag or config key) in errors:
/// std::runtime_error for cuda when no CUDA device exists.
c10::Device resolve_device(DeviceChoice choice, const std::string& option = "--device");

/// The same for a name read from `option`; std::invalid_argument "<option>: '<name>' is not one of
/// auto, cpu, cuda" for any other name.
c10::Device resolve_device(const std::string& name, const std::string& option = "--device");

/// Human-readable name of the device ("cpu", or the CUDA device's name).
std::string device_name(const c10::Device& device);

/// Compute capability of a CUDA device as 10 * major + minor (90 for an H100/H200, 80 for an A100);
/// 0 on the CPU. The device must exist (a CUDA device index that does not exist throws c10::Error).
int cuda_compute_capability(const c10::Device& device);

/// Dense bf16 peak FLOP/s of the current CUDA device from a table of known parts (H100/H200 989e12,
/// A100 312e12, ...); 0 when unknown or on CPU (MFU is then not reported).
double peak_flops(const c10::Device& device);

/// The most memory a run can hold on `device`, in bytes: the CUDA device's total memory, or on the
/// CPU the host's RAM plus swap (sysinfo(2)). The ceiling that check_fits_memory compares with.
double device_memory_bytes(const c10::Device& device);

/// RAII: enables autocast to bf16 on CUDA for its lifetime when `enabled` (no-op on CPU).
class AutocastGuard {
 public:
  AutocastGuard(const c10::Device& device, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  bool previous_ = false;
};

}  // namespace attnlab
