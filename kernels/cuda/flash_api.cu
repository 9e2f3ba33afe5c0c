// The attention launchers of flash_attention_cuda.h: check the call, fill FlashParams, and pick the
// (dtype, head dim) instantiation at run time. Features stay runtime flags inside the kernels.
#include <cmath>
#include <cstdint>
#include <string>

#include "attnlab_kernels/flash_attention_cuda.h"
#include "attnlab_kernels/window_rule.h"
#include "flash_launch.cuh"

namespace attnlab::kernels {
namespace {

using cuda::FlashParams;

[[noreturn]] void unsupported(const std::string& what) {
  throw std::runtime_error("flash_attention (CUDA): " + what);
}

void require_aligned(const void* ptr, const char* name) {
  if (ptr != nullptr && reinterpret_cast<std::uintptr_t>(ptr) % 16 != 0)
    unsupported(std::string(name) + " must be 16-byte aligned (pass a fresh contiguous tensor)");
}

void check_shape(const AttentionShape& s) {
  if (s.dtype == DType::f64) unsupported("float64 runs on the CPU kernels only");
  if (s.head_dim != 64 && s.head_dim != 128)
    unsupported("head_dim " + std::to_string(s.head_dim) + " (supported: 64, 128)");
  if (s.batch < 0 || s.heads < 0 || s.q_len < 0 || s.q_len > s.k_len)
    unsupported("needs 0 <= q_len <= k_len, got q_len " + std::to_string(s.q_len) + ", k_len " +
                std::to_string(s.k_len));
  if (s.batch * s.heads > 65535) unsupported("batch * heads above 65535 (grid y limit)");
  if (s.window < 0 || s.keep_first < 0)
    unsupported("needs window >= 0 and keep_first >= 0, got window " + std::to_string(s.window) +
                ", keep_first " + std::to_string(s.keep_first));
}

void check_forward_args(const ForwardArgs& a, const AttentionShape& s) {
  if (!a.q || !a.k || !a.v || !a.o || !a.lse) unsupported("q, k, v, o and lse are required");
  if (s.has_routing_bias && !a.routing_bias) unsupported("has_routing_bias without routing_bias");
  if (s.has_key_mask && !a.key_mask) unsupported("has_key_mask without key_mask");
  require_aligned(a.q, "q");
  require_aligned(a.k, "k");
  require_aligned(a.v, "v");
}

FlashParams make_params(const AttentionShape& s, const ForwardArgs& a) {
  FlashParams p;
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.sink_logit = s.has_sink ? static_cast<const float*>(a.sink_logit) : nullptr;
  p.routing_bias = s.has_routing_bias ? static_cast<const float*>(a.routing_bias) : nullptr;
  p.key_mask = s.has_key_mask ? a.key_mask : nullptr;
  p.o = a.o;
  p.lse = static_cast<float*>(a.lse);
  p.batch = s.batch;
  p.heads = s.heads;
  p.q_len = s.q_len;
  p.k_len = s.k_len;
  p.head_dim = static_cast<int>(s.head_dim);
  p.scale = static_cast<float>(s.scale > 0.0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  p.has_sink = s.has_sink;
  // A window that hides no key of the call (Tk <= W + n) runs the global layer's walk, bit for bit
  // (docs/windows.md, "Backends").
  const bool hides = window_hides_keys(s.window, s.keep_first, s.k_len);
  p.window = hides ? s.window : 0;
  p.keep_first = hides ? s.keep_first : 0;
  return p;
}

/// Calls launch.run<T, D>() for the instantiation that matches the shape.
template <typename Launch>
void dispatch(const AttentionShape& s, Launch&& launch) {
  const bool d64 = s.head_dim == 64;
  switch (s.dtype) {
    case DType::f32:
      return d64 ? launch.template run<float, 64>() : launch.template run<float, 128>();
    case DType::f16:
      return d64 ? launch.template run<__half, 64>() : launch.template run<__half, 128>();
    case DType::bf16:
      return d64 ? launch.template run<__nv_bfloat16, 64>() : launch.template run<__nv_bfloat16, 128>();
    case DType::f64:
      break;
  }
  unsupported("dtype");
}

struct ForwardLaunch {
  const FlashParams& p;
  cudaStream_t stream;
  template <typename T, int D>
  void run() const {
    cuda::run_flash_fwd<T, D>(p, stream);
  }
};

struct BackwardLaunch {
  const FlashParams& p;
  cudaStream_t stream;
  template <typename T, int D>
  void run() const {
    cuda::run_flash_bwd_delta<T>(p, stream);
    cuda::run_flash_bwd<T, D>(p, stream);
  }
};

}  // namespace

void flash_attention_forward_cuda(const AttentionShape& shape, const ForwardArgs& args, void* stream) {
  check_shape(shape);
  check_forward_args(args, shape);
  require_aligned(args.o, "o");
  if (shape.batch * shape.heads == 0 || shape.q_len == 0) return;
  const FlashParams p = make_params(shape, args);
  dispatch(shape, ForwardLaunch{p, static_cast<cudaStream_t>(stream)});
}

std::size_t flash_attention_backward_workspace_bytes(const AttentionShape& shape) {
  return sizeof(float) * static_cast<std::size_t>(shape.batch * shape.heads * shape.q_len);
}

void flash_attention_backward_cuda(const AttentionShape& shape, const BackwardArgs& args, void* stream,
                                   void* workspace, const void* d_lse) {
  check_shape(shape);
  check_forward_args(args.fwd, shape);
  if (!args.d_o || !args.d_q || !args.d_k || !args.d_v) unsupported("d_o, d_q, d_k and d_v are required");
  const void* grads[] = {args.fwd.o, args.d_o, args.d_q, args.d_k, args.d_v};
  for (const void* ptr : grads) require_aligned(ptr, "o, d_o, d_q, d_k and d_v");
  if (shape.batch * shape.heads == 0 || shape.k_len == 0) return;

  auto s = static_cast<cudaStream_t>(stream);
  FlashParams p = make_params(shape, args.fwd);
  p.d_o = args.d_o;
  p.d_q = args.d_q;
  p.d_k = args.d_k;
  p.d_v = args.d_v;
  p.d_lse = static_cast<const float*>(d_lse);
  p.d_sink_logit = shape.has_sink ? static_cast<float*>(args.d_sink_logit) : nullptr;
  p.d_routing_bias = shape.has_routing_bias ? static_cast<float*>(args.d_routing_bias) : nullptr;
  if (p.d_sink_logit)
    cuda::check_cuda(cudaMemsetAsync(p.d_sink_logit, 0, sizeof(float) * shape.heads, s), "zero d_sink_logit");

  const std::size_t bytes = flash_attention_backward_workspace_bytes(shape);
  void* owned = nullptr;
  if (workspace == nullptr && bytes > 0)
    cuda::check_cuda(cudaMallocAsync(&owned, bytes, s), "flash_attention backward workspace");
  p.delta = static_cast<float*>(workspace ? workspace : owned);
  try {
    dispatch(shape, BackwardLaunch{p, s});
  } catch (...) {
    if (owned) cudaFreeAsync(owned, s);
    throw;
  }
  if (owned) cuda::check_cuda(cudaFreeAsync(owned, s), "free flash_attention backward workspace");
}

}  // namespace attnlab::kernels
