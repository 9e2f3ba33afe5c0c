// Fused, memory-linear attention (docs/kernels.md): the shared form of SPEC section 1 computed by the tiled
// kernels of kernels/ (CPU twin in kernels/cpu, CUDA in kernels/cuda), wrapped as an autograd
// function. Same contract as reference_attention (attention.h), without the T x T probabilities.
#pragma once

#include <ATen/core/Tensor.h>

#include "attnlab/attention.h"

namespace attnlab {

/// CPU tile sizes (rows of Q and of K per tile); 0 = the kernel default (64). Results agree for any
/// tiling up to round-off; tests vary it. Ignored on CUDA.
struct FusedTiling {
  int64_t q_tile = 0;
  int64_t k_tile = 0;
};

/// Fused causal attention of SPEC section 1:
///   a_ij = exp(s_ij + r_j - lse_i),  lse_i = log( [sink] exp(b_h) + sum_{j visible} exp(s_ij + r_j) ),
///   s_ij = scale * q_i . k_j,        o_i = sum_j a_ij v_j       (v already gated: g_j * v_j).
/// Inputs as AttentionInputs: q [B, H, Tq, d], k and v [B, H, Tk, d] (Tq <= Tk, queries at the last
/// positions), optional routing_bias [B, H, Tk], sink_logit [H], key_mask [B, Tk] bool.
/// Returns o [B, H, Tq, d] in q's dtype and lse [B, H, Tq] in nats (float32; float64 for float64),
/// including the sink term; a row with no visible key gives o = 0 and lse = b_h (or -inf without a
/// sink). `probs` is never filled: no T x T tensor exists, memory grows linearly in T.
/// in.window (a local layer) skips the key tiles outside it: O(T (W + n)) work (docs/windows.md).
/// Differentiable in q, k, v, routing_bias, sink_logit and (through lse) everything else.
///  - CPU: float32 and float64 run natively (accumulating in float / double); float16 and bfloat16
///    are upcast to float32 and the output cast back.
///  - CUDA: the kernels of kernels/cuda (float32, float16, bfloat16; head_dim 64 or 128) when the
///    build has them (ATTNLAB_WITH_CUDA); otherwise std::runtime_error saying so.
/// Throws std::invalid_argument for inconsistent shapes (check_attention_inputs), tensors on different
/// devices, or an unsupported dtype.
AttentionResult fused_attention(const AttentionInputs& in, const FusedTiling& tiling = {});

/// True when this build can run fused attention on CUDA tensors (compiled with the CUDA kernels).
bool fused_cuda_compiled();

}  // namespace attnlab
