// What the torch side needs to hand tensors to the Torch-free kernels (kernels/include): dtype
// mapping, the thread pool as a ParallelFor, the current CUDA stream without CUDA headers, and the
// argument preparation both fused wrappers share. Private to src/.
#pragma once

#include <ATen/core/Tensor.h>

#include "attnlab_kernels/cpu.h"

namespace attnlab::detail {

/// f32/f64/f16/bf16; throws std::invalid_argument naming `who` for any other dtype.
kernels::DType kernel_dtype(at::ScalarType type, const char* who);

/// at::parallel_for as the kernels' ParallelFor.
const kernels::ParallelFor& torch_parallel_for();

/// The current stream of `device` as an opaque pointer (cudaStream_t for CUDA).
void* current_stream(const at::Device& device);

/// `t` contiguous, in `type`, with a 16-byte aligned data pointer (the CUDA launchers require it);
/// undefined stays undefined.
at::Tensor kernel_ready(const at::Tensor& t, at::ScalarType type);

/// data pointer or null for an undefined tensor.
inline const void* ptr_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
inline void* mut_ptr_or_null(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

}  // namespace attnlab::detail
