// Every arm on cuDNN's fused attention (attention backend `cudnn`): at::_scaled_dot_product_cudnn_attention
// and its backward, under the flash backend's composition (docs/kernels.md, "cuDNN beside
// FlashAttention-2"): the sink by the LSE correction, the routing bias and the lse gradient in three
// extra key / output columns (the op's backward returns no bias gradient), the gates outside the
// kernel. Same contract as flash_attention (flash_attention.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>

#include "attnlab/attention.h"
#include "attnlab/attention_request.h"

namespace attnlab {

/// Largest head_dim the cuDNN route takes: head_dim plus three key columns for the routing bias,
/// padded to a multiple of 8, stays within 128, the head dim cuDNN's fused attention takes on Ampere
/// and Hopper alike (Hopper may take more; not measured).
inline constexpr int64_t kCudnnMaxHeadDim = 125;

/// Why `cudnn_attention` cannot serve a call, or "" when it can: CUDA only, bfloat16 or float16,
/// compute capability >= 8.0 (`cuda_capability` 0: unknown, not checked), head_dim <=
/// kCudnnMaxHeadDim, the square causal case (Tq = Tk) and no key mask. The cudnn row of the backend
/// table (backend_table.cpp) refuses probabilities and a window that hides a key besides.
std::string cudnn_refusal(const AttentionRequest& request);

/// What the cuDNN forward returns, as the op returns it: o laid out like q, lse (nats, float32) in
/// the op's own shape ([B, H, T, 1] in torch 2.11), and the dropout RNG state its backward asks for.
struct CudnnForward {
  at::Tensor o, lse, philox_seed, philox_offset;
};

/// The two calls the cuDNN route makes, on operands the composition prepared (q, k, v [B, H, T, w]
/// with w a multiple of 8, rows contiguous, laid out [B, T, H, w]); causal, no dropout, no bias.
///  - forward(q, k, v, scale): at::_scaled_dot_product_cudnn_attention with compute_log_sumexp;
///  - backward(d_o, q, k, v, out, lse, forward, scale) -> (dq, dk, dv):
///    at::_scaled_dot_product_cudnn_attention_backward; d_o arrives laid out like `out` and lse in
///    the forward's shape, as cuDNN wants them.
/// Replaceable so that the composition around them is tested without a GPU: a CPU stand-in that
/// keeps the op's conventions (tests/parity/test_cudnn_composition.cpp).
struct CudnnKernelCalls {
  std::function<CudnnForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale)> forward;
  std::function<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
      const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
      const at::Tensor& lse, const CudnnForward& forward, double scale)>
      backward;
};

/// The real calls: LibTorch's cuDNN attention ops (run only for CUDA tensors).
CudnnKernelCalls cudnn_kernel_calls();

/// Causal attention of SPEC section 1 on cuDNN, as flash_attention computes it: inputs as
/// AttentionInputs (q, k, v [B, H, T, d] in bfloat16 or float16, rows contiguous; optional
/// routing_bias [B, H, T] and sink_logit [H], used in float32); returns o [B, H, T, d] in q's dtype
/// (laid out like q) and lse [B, H, T] float32 nats including the sink term. Differentiable in q, k,
/// v, routing_bias and sink_logit, also through lse. Throws std::invalid_argument when
/// cudnn_refusal() names a reason, for inconsistent shapes, or tensors on different devices.
AttentionResult cudnn_attention(const AttentionInputs& in);

/// The same composition on other kernel calls (a CPU stand-in in tests): only the checks that do
/// not depend on the device (square causal, no key mask, floating dtype, shapes) are made here.
AttentionResult cudnn_attention(const AttentionInputs& in, const CudnnKernelCalls& calls);

/// What GPU runs have recorded about cuDNN against FlashAttention-2 on devices of one compute
/// capability (the table of docs/kernels.md, "cuDNN beside FlashAttention-2", which `auto` reads).
struct CudnnRecord {
  bool faster_and_correct = false;  ///< a run measured cuDNN faster, its self-check and GPU tests passed
  std::string why;                  ///< the record, or that there is none ("not measured")
};

/// The record for `cuda_capability` (10 * major + minor).
CudnnRecord cudnn_record(int cuda_capability);

}  // namespace attnlab
