// CUDA launchers of the fused attention and value-gate kernels (kernels/cuda). Declared only when
// CMake compiled them (ATTNLAB_WITH_CUDA). Plain C++: no CUDA or Torch header needed to call them.
//
// Every launcher runs on the current CUDA device and on `stream` (a cudaStream_t; null = the legacy
// default stream), returns without waiting for the GPU, and throws std::runtime_error naming the
// CUDA error, or the unsupported shape, when it cannot launch. Supported: dtype f32, f16 or bf16
// (f64 is CPU only); attention head_dim 64 or 128; every device pointer 16-byte aligned.
#pragma once

#include <cstddef>

#include "attnlab_kernels/flash_attention.h"
#include "attnlab_kernels/value_gate.h"

#ifdef ATTNLAB_WITH_CUDA
namespace attnlab::kernels {

/// Writes o and lse (see ForwardArgs). has_sink with a null sink_logit means b_h = 0 (off_by_one).
void flash_attention_forward_cuda(const AttentionShape& shape, const ForwardArgs& args, void* stream);

/// Bytes of device workspace the backward needs (D_i for every query row, float).
std::size_t flash_attention_backward_workspace_bytes(const AttentionShape& shape);

/// Writes d_q, d_k, d_v, and d_sink_logit / d_routing_bias where those pointers are non-null (all
/// overwritten). `workspace` holds flash_attention_backward_workspace_bytes(shape) bytes; when null
/// the launcher takes it stream-ordered (cudaMallocAsync) and frees it after the kernels. `d_lse`
/// ([B, H, Tq] float, may be null) is the upstream gradient of lse itself, as in
/// flash_attention_backward_cpu. d_sink_logit is summed with float atomics: run to run it may differ
/// in the last bits.
void flash_attention_backward_cuda(const AttentionShape& shape, const BackwardArgs& args, void* stream,
                                   void* workspace = nullptr, const void* d_lse = nullptr);

/// Gated reads and/or routing bias of one layer's value gate (see ValueGateForwardArgs).
void value_gate_forward_cuda(const ValueGateShape& shape, const ValueGateForwardArgs& args, void* stream);

/// Gradients of the gate (see ValueGateBackwardArgs). Parameter gradients use float atomics.
void value_gate_backward_cuda(const ValueGateShape& shape, const ValueGateBackwardArgs& args, void* stream);

}  // namespace attnlab::kernels
#endif  // ATTNLAB_WITH_CUDA
