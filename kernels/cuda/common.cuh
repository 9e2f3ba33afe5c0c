// Small pieces every CUDA kernel file shares: error checks, dtype conversion, warp reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace attnlab::kernels::cuda {

inline void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

/// A launch reports bad configurations only through cudaGetLastError.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

/// 16-bit element types go through tensor cores (wmma); float stays on plain FMA units so that f32
/// inputs keep f32 products (tf32 would lose 13 mantissa bits).
template <typename T>
inline constexpr bool kTensorCore = !std::is_same_v<T, float>;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(x);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return x;
  }
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

#ifndef ATTNLAB_CUDA_HOST_EMULATION  // kernels/emulation supplies its own, sized per launch
/// The block's dynamic shared memory, 128-byte aligned (the launch sets its size).
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(128) unsigned char attnlab_dynamic_smem[];
  return attnlab_dynamic_smem;
}
#endif

__host__ __device__ constexpr std::size_t align128(std::size_t bytes) { return (bytes + 127) / 128 * 128; }

inline constexpr float kInf = __builtin_huge_valf();

}  // namespace attnlab::kernels::cuda
