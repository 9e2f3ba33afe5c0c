// Launchers of the value-gate kernels (value_gate_kernel.cuh) declared in flash_attention_cuda.h.
#include <string>

#include "attnlab_kernels/flash_attention_cuda.h"
#include "value_gate_kernel.cuh"

namespace attnlab::kernels {
namespace {

using cuda::check_cuda;
using cuda::check_launch;
using cuda::GateGeometry;
using cuda::GateParams;

[[noreturn]] void unsupported(const std::string& what) {
  throw std::runtime_error("value_gate (CUDA): " + what);
}

GateParams make_params(const ValueGateShape& s, const ValueGateForwardArgs& a) {
  if (s.dtype == DType::f64) unsupported("float64 runs on the CPU kernels only");
  if (s.head_dim < 1 || s.head_dim > GateGeometry::kMaxDim) unsupported("head_dim must be in [1, 256]");
  if (s.heads > 65535) unsupported("more than 65535 heads");
  const bool norm = s.kind == ValueGateKind::norm;
  if (!a.v || (norm && !a.tau) || (!norm && (!a.w || !a.c)))
    unsupported("v and the gate's parameters are required");
  GateParams p;
  p.v = a.v;
  p.tau = static_cast<const float*>(a.tau);
  p.w = static_cast<const float*>(a.w);
  p.c = static_cast<const float*>(a.c);
  p.gated_v = a.gated_v;
  p.log_gate = static_cast<float*>(a.log_gate);
  p.batch = s.batch;
  p.heads = s.heads;
  p.len = s.len;
  p.dim = static_cast<int>(s.head_dim);
  p.beta = static_cast<float>(s.beta);
  p.norm = norm;
  return p;
}

template <template <typename> class Kernel>
void launch(const ValueGateShape& s, const GateParams& p, void* stream, const char* name) {
  const dim3 grid(static_cast<unsigned>((p.batch * p.len + GateGeometry::kRowsPerBlock - 1) /
                                        GateGeometry::kRowsPerBlock),
                  static_cast<unsigned>(p.heads));
  auto st = static_cast<cudaStream_t>(stream);
  switch (s.dtype) {
    case DType::f32:
      Kernel<float>::launch(grid, p, st);
      break;
    case DType::f16:
      Kernel<__half>::launch(grid, p, st);
      break;
    case DType::bf16:
      Kernel<__nv_bfloat16>::launch(grid, p, st);
      break;
    case DType::f64:
      unsupported("dtype");
  }
  check_launch(name);
}

template <typename T>
struct Forward {
  static void launch(dim3 grid, const GateParams& p, cudaStream_t s) {
    cuda::value_gate_forward_kernel<T><<<grid, GateGeometry::kThreads, 0, s>>>(p);
  }
};

template <typename T>
struct Backward {
  static void launch(dim3 grid, const GateParams& p, cudaStream_t s) {
    cuda::value_gate_backward_kernel<T>
        <<<grid, GateGeometry::kThreads, GateGeometry::kBackwardSmemBytes, s>>>(p);
  }
};

void zero(float* ptr, int64_t count, void* stream, const char* what) {
  if (ptr)
    check_cuda(cudaMemsetAsync(ptr, 0, sizeof(float) * count, static_cast<cudaStream_t>(stream)), what);
}

}  // namespace

void value_gate_forward_cuda(const ValueGateShape& shape, const ValueGateForwardArgs& args, void* stream) {
  const GateParams p = make_params(shape, args);
  if (p.batch * p.len == 0 || p.heads == 0) return;
  launch<Forward>(shape, p, stream, "value_gate_forward_kernel");
}

void value_gate_backward_cuda(const ValueGateShape& shape, const ValueGateBackwardArgs& args, void* stream) {
  GateParams p = make_params(shape, args.fwd);
  if (!args.d_v) unsupported("d_v is required");
  p.d_gated_v = args.d_gated_v;
  p.d_log_gate = static_cast<const float*>(args.d_log_gate);
  p.d_v = args.d_v;
  p.d_tau = p.norm ? static_cast<float*>(args.d_tau) : nullptr;
  p.d_w = p.norm ? nullptr : static_cast<float*>(args.d_w);
  p.d_c = p.norm ? nullptr : static_cast<float*>(args.d_c);
  zero(p.d_tau, p.heads, stream, "zero d_tau");
  zero(p.d_w, p.heads * p.dim, stream, "zero d_w");
  zero(p.d_c, p.heads, stream, "zero d_c");
  if (p.batch * p.len == 0 || p.heads == 0) return;
  launch<Backward>(shape, p, stream, "value_gate_backward_kernel");
}

}  // namespace attnlab::kernels
