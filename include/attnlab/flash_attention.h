// Every arm on the vendor flash kernels (attention backend `flash`): LibTorch's fused attention
// kernels that return their log-sum-exp (CPU: at::_scaled_dot_product_flash_attention_for_cpu;
// CUDA: at::_scaled_dot_product_flash_attention, FlashAttention-2), with the arm's features added
// around them as exact corrections (docs/kernels.md, "The flash backend"). Same contract as
// reference_attention (attention.h), without the T x T probabilities.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "attnlab/attention.h"
#include "attnlab/attention_request.h"

namespace attnlab {

/// The oldest CUDA compute capability FlashAttention-2 runs on (sm_80, Ampere), as 10 * major + minor.
inline constexpr int kFlashMinCudaCapability = 80;

/// Why `flash_attention` cannot serve a call, or "" when it can:
///  - CPU: any floating dtype (float32, float64, bfloat16, float16);
///  - CUDA: bfloat16 or float16 (FlashAttention-2 has no float32), head_dim + 3 <= 256 (the
///    routing bias rides in 3 spare columns below the kernels' limit of 256), and a device of compute
///    capability >= 8.0 (`cuda_capability` 0: unknown, not checked);
///  - queries and keys of equal length: the square causal case (the CPU kernel aligns its causal
///    mask top-left, so KV-cache decoding with Tq < Tk is left to the other backends);
///  - no key mask;
///  - a window (a local layer that hides a key, attention_window.h): on CUDA keep_first = 0 only
///    (FlashAttention-2's window_size_left = W - 1); on CPU any, the kernel run over query chunks
///    against the keys each chunk sees (docs/windows.md, "Backends").
/// What the flash backend's row refuses besides (backend_table.cpp): probabilities, and half types on
/// the CPU; flash_attention() itself runs those so the key-column tests can check CUDA's composition.
std::string flash_refusal(const AttentionRequest& request);

/// How the arm's extras reach the kernel (docs/kernels.md, "The flash backend"):
///  - device: the device's own way. CPU: the routing bias is the kernel's additive mask and an lse
///    gradient one more head_dim column. CUDA: key_columns (FlashAttention-2 takes no mask).
///  - key_columns: the routing bias and the lse gradient ride in three extra head_dim columns each,
///    split into hi + mid + lo parts exact in the input dtype, head_dim padded to a multiple of 8.
///    Asked for on CPU, it runs CUDA's composition with the CPU kernel: how CI tests that composition
///    without a GPU (tests/parity/test_flash_key_columns.cpp).
enum class FlashComposition { device, key_columns };

/// Flash causal attention of SPEC section 1:
///   a_ij = exp(s_ij + r_j - lse_i),  lse_i = log( [sink] exp(b_h) + sum_{j <= i} exp(s_ij + r_j) ),
///   s_ij = scale * q_i . k_j,        o_i = sum_j a_ij v_j       (v already gated: g_j * v_j).
/// Inputs as AttentionInputs: q, k, v [B, H, T, d] in one floating dtype (any strides whose last
/// dimension is contiguous: the model's [B, T, H, d] views transposed are read in place), optional
/// routing_bias [B, H, T] and sink_logit [H] (any floating dtype; used in the accumulator dtype,
/// float32, or float64 for float64 inputs).
/// Returns o [B, H, T, d] in q's dtype (memory laid out [B, T, H, d], so the caller's transpose back
/// to [B, T, H * d] is free) and lse [B, H, T] in nats (float32; float64 for float64), including the
/// sink term. Differentiable in q, k, v, routing_bias, sink_logit, also through lse.
/// Deterministic on CPU: two backward calls on the same inputs give bit-identical gradients.
/// Throws std::invalid_argument when flash_refusal() names a reason, for inconsistent shapes
/// (check_attention_inputs) or tensors on different devices.
AttentionResult flash_attention(const AttentionInputs& in, FlashComposition composition = FlashComposition::device);

}  // namespace attnlab
