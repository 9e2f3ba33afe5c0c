#include "attention/kernel_bridge.h"

#include <ATen/Parallel.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace attnlab::detail {

kernels::DType kernel_dtype(at::ScalarType type, const char* who) {
  switch (type) {
    case at::kFloat: return kernels::DType::f32;
    case at::kDouble: return kernels::DType::f64;
    case at::kHalf: return kernels::DType::f16;
    case at::kBFloat16: return kernels::DType::bf16;
    default: break;
  }
  throw std::invalid_argument(std::string(who) + ": fused kernels take float32, float64, float16 or bfloat16, got " +
                              c10::toString(type));
}

const kernels::ParallelFor& torch_parallel_for() {
  static const kernels::ParallelFor parallel = [](int64_t n, int64_t grain, const kernels::RangeFn& body) {
    at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) { body(begin, end); });
  };
  return parallel;
}

void* current_stream(const at::Device& device) {
  return c10::impl::getDeviceGuardImpl(device.type())->getStream(device).native_handle();
}

at::Tensor kernel_ready(const at::Tensor& t, at::ScalarType type) {
  if (!t.defined()) return t;
  auto out = t.to(type).contiguous();
  if (reinterpret_cast<std::uintptr_t>(out.data_ptr()) % 16 != 0) out = out.clone();
  return out;
}

}  // namespace attnlab::detail
