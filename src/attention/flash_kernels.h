// LibTorch's fused attention kernels that return their log-sum-exp (its flash kernels on CPU and CUDA,
// cuDNN's on CUDA: cudnn_attention.h) behind one interface, with the two things they lack made exact
// around them: an additive per-key routing bias r_j (renorm) that is differentiated, and a gradient
// arriving through the lse (docs/kernels.md, "The flash backend"). Private to src/attention:
// flash_attention.cpp adds the sink term on top.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "attnlab/flash_attention.h"

namespace attnlab::detail {

/// One forward call's results and what its backward needs.
struct FlashForward {
  at::Tensor o;    ///< [B, H, T, d] in q's dtype, memory laid out [B, T, H, d]
  at::Tensor lse;  ///< [B, H, T] float32 (float64 for float64): log sum_{j <= i} exp(s_ij + r_j)
  at::Tensor philox_seed, philox_offset;  ///< CUDA: the kernel's RNG state (no dropout; its backward asks)
  std::vector<int64_t> kernel_lse_shape;  ///< lse's shape as the kernel returned it, where not [B, H, T] (cuDNN)
};

/// One vendor kernel pair on operands a composition prepared: causal attention of q, k, v
/// [B, H, T, w] (rows contiguous), `scale` multiplying q . k, an optional additive mask (only the CPU
/// flash kernel takes one). forward returns o laid out like q and lse [B, H, T]; backward takes the
/// upstream d_o, the `out` and `lse` [B, H, T] to differentiate at, and the forward's results.
struct KernelCalls {
  std::function<FlashForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::optional<at::Tensor>& mask, double scale)>
      forward;
  std::function<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
      const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
      const at::Tensor& lse, const std::optional<at::Tensor>& mask, double scale, const FlashForward& forward)>
      backward;
};

/// Which kernels a call runs on and how the arm's extras reach them.
struct KernelRoute {
  FlashComposition composition = FlashComposition::device;
  std::shared_ptr<const KernelCalls> calls;  ///< null: LibTorch's flash kernels of q's device
  /// A local layer's window, one that hides a key of the call (none: a global layer). CUDA:
  /// FlashAttention-2's window_size_left = W - 1 (keep_first 0 only); CPU: LibTorch's CPU flash
  /// kernel over query chunks against the keys each chunk sees (docs/windows.md, "Backends").
  AttentionWindow window;
};

/// Gradients of one backward call; d_bias stays undefined without a bias.
struct FlashGrads {
  at::Tensor dq, dk, dv;  ///< like q, k, v
  at::Tensor d_bias;      ///< [B, H, T] in the accumulator dtype
};

/// Causal flash forward: q, k, v [B, H, T, d] in one dtype, optional routing bias [B, H, T] in the
/// accumulator dtype (float32; float64 for float64) added to every logit of key j; `scale` multiplies
/// q . k. Kernel mask (CPU's own): the bias is the kernel's additive mask broadcast [B, H, 1, T].
/// Key columns (CUDA; CPU when `composition` asks): it rides in three extra key columns (hi + mid +
/// lo parts of r_j / scale in the input dtype, queries 1 there), head_dim padded to the next
/// multiple of 8.
FlashForward flash_kernel_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const at::Tensor& bias, double scale, const KernelRoute& route = {});

/// Backward of the attention with probabilities P_ij = exp(s_ij + r_j - lse_i) for the given `lse`,
/// upstream d_o [B, H, T, d] and optional d_lse [B, H, T]:
///   D_i = d_o_i . out_i - d_lse_i,   dS_ij = P_ij (d_o_i . v_j - D_i),
///   dq = scale dS k,  dk = scale dS^T q,  dv = P^T d_o,  d_bias_j = sum_i dS_ij.
/// `out` and `lse` are what the caller returned as its forward (the sink-corrected o' and lse'), so
/// one call serves every arm. Without bias and d_lse this is the kernel's own backward; with either,
/// the kernel runs on one more column (q_i 1, k_j 0, v_j 0, out_i -d_lse_i, d_o_i 1 or 0), where
/// dk's extra column is scale * sum_i dS_ij and the extra out . d_o term shifts D_i by -d_lse_i.
/// (Key columns: three columns each, the bias and -d_lse split into parts in the input dtype.)
/// `route` must be the forward's.
FlashGrads flash_kernel_backward(const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                 const at::Tensor& d_lse, const at::Tensor& bias, double scale,
                                 const FlashForward& forward, const KernelRoute& route = {});

/// Throws std::invalid_argument, naming `who`, when an input of `in` is on another device than q.
void check_same_device(const AttentionInputs& in, const char* who);

/// The flash backend's autograd function (flash_attention.cpp) on `route`: the kernels' (o, lse)
/// with the sink correction, differentiable in q, k, v, routing_bias and sink_logit, also through
/// lse. The caller has checked `in` (flash_attention, cudnn_attention).
AttentionResult composed_kernel_attention(const AttentionInputs& in, const KernelRoute& route);

/// Largest head_dim the CUDA path takes (three bias columns below FlashAttention-2's 256).
inline constexpr int64_t kFlashCudaMaxHeadDim = 253;

}  // namespace attnlab::detail
