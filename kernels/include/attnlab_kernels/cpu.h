// CPU twins of the fused kernels (kernels/cpu): the same tiled algorithm as the CUDA kernels, so the
// algorithm is tested on every machine and CPU training gets memory-linear attention too.
// Plain C++: no Torch. The caller hands in its thread pool as a ParallelFor (the torch side passes
// at::parallel_for); an empty ParallelFor runs serially.
//
// Supported dtypes: f32 (accumulates in float) and f64 (accumulates in double); f16 / bf16 are
// upcast by the caller. Each entry point throws std::invalid_argument for an unsupported dtype, a
// missing pointer or an impossible shape (q_len > k_len, non-positive scale).
#pragma once

#include <cstdint>
#include <functional>

#include "attnlab_kernels/flash_attention.h"
#include "attnlab_kernels/value_gate.h"

namespace attnlab::kernels {

/// Runs body(begin, end) over sub-ranges covering [0, n) exactly once, possibly concurrently;
/// `grain` is the smallest useful sub-range.
using RangeFn = std::function<void(int64_t begin, int64_t end)>;
using ParallelFor = std::function<void(int64_t n, int64_t grain, const RangeFn& body)>;

/// Tile sizes of the CPU kernels (rows of Q and rows of K per tile). Any positive values give the
/// same result up to round-off; the defaults keep one K tile plus its transpose in L1/L2.
struct CpuTiling {
  int64_t q_tile = 64;
  int64_t k_tile = 64;
};

/// Forward: writes o and lse (ForwardArgs). has_sink with a null sink_logit means b_h = 0
/// (off_by_one), as in the CUDA launcher. Memory beyond the outputs, per thread: one key tile, one
/// score tile and one query tile's accumulators, O(k_tile * head_dim + q_tile * (k_tile + head_dim)),
/// independent of T.
void flash_attention_forward_cpu(const AttentionShape& shape, const ForwardArgs& args,
                                 const ParallelFor& parallel = {}, const CpuTiling& tiling = {});

/// Backward: writes d_q, d_k, d_v (overwritten) and d_sink_logit / d_routing_bias where non-null,
/// recomputing probabilities from lse. `d_lse` ([B, H, Tq] acc type, may be null) is the upstream
/// gradient of lse itself; it enters as D_i -> D_i - d_lse_i. Deterministic: parallel over (b, h),
/// d_sink_logit reduced over the batch in a fixed order. Memory beyond the outputs: per thread the
/// tiles of the forward plus D_i of one head (Tq values), and B * H partial sink gradients.
void flash_attention_backward_cpu(const AttentionShape& shape, const BackwardArgs& args,
                                  const void* d_lse = nullptr, const ParallelFor& parallel = {},
                                  const CpuTiling& tiling = {});

/// Gated reads and/or routing bias of one layer's value gate (ValueGateForwardArgs).
void value_gate_forward_cpu(const ValueGateShape& shape, const ValueGateForwardArgs& args,
                            const ParallelFor& parallel = {});

/// Gradients of the gate (ValueGateBackwardArgs); parameter gradients reduced in a fixed order.
void value_gate_backward_cpu(const ValueGateShape& shape, const ValueGateBackwardArgs& args,
                             const ParallelFor& parallel = {});

}  // namespace attnlab::kernels
