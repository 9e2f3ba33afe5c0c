// Block-wide copies between device memory and shared-memory tiles, with predicated tails so any
// sequence length works (rows past the end become zeros, keys past the end become -inf logits).
#pragma once

#include "flash_params.cuh"

namespace attnlab::kernels::cuda {

/// 16 bytes into a tile row. 16-bit tiles have 16-byte aligned rows (pad 8); float rows (pad 1)
/// are only word aligned, so they take four word stores.
template <typename T>
__device__ __forceinline__ void store_chunk(T* dst, const uint4& chunk) {
  if constexpr (kTensorCore<T>) {
    *reinterpret_cast<uint4*>(dst) = chunk;
  } else {
    dst[0] = __uint_as_float(chunk.x);
    dst[1] = __uint_as_float(chunk.y);
    dst[2] = __uint_as_float(chunk.z);
    dst[3] = __uint_as_float(chunk.w);
  }
}

/// tile[r][:] = src[row0 + r][:] for r < kRows (zeros where row0 + r >= n_rows). src is one
/// head's [n_rows, D] matrix; every thread of the block takes part, 16 bytes at a time
/// (consecutive threads read consecutive chunks of a row: coalesced).
template <typename T, int D, int kRows, int kThreads>
__device__ void load_rows(T* tile, int ld, const T* src, int64_t row0, int64_t n_rows) {
  constexpr int kChunk = 16 / sizeof(T);
  constexpr int kChunksPerRow = D / kChunk;
  for (int idx = threadIdx.x; idx < kRows * kChunksPerRow; idx += kThreads) {
    const int r = idx / kChunksPerRow;
    const int c = (idx % kChunksPerRow) * kChunk;
    uint4 chunk = make_uint4(0u, 0u, 0u, 0u);
    if (row0 + r < n_rows) chunk = *reinterpret_cast<const uint4*>(src + (row0 + r) * D + c);
    store_chunk(tile + r * ld + c, chunk);
  }
}

/// add[c] = the term key k0 + c adds to every logit: its routing bias (0 without one), or -inf when
/// the key is past the end or masked out. Causality is applied per (query, key) by the kernels.
template <int kCols, int kThreads>
__device__ void load_key_addend(float* add, const FlashParams& p, int64_t bh, int64_t k0) {
  const int64_t b = bh / p.heads;
  for (int c = threadIdx.x; c < kCols; c += kThreads) {
    const int64_t j = k0 + c;
    float a = -kInf;
    if (j < p.k_len && (p.key_mask == nullptr || p.key_mask[b * p.k_len + j]))
      a = p.routing_bias ? p.routing_bias[bh * p.k_len + j] : 0.0f;
    add[c] = a;
  }
}

}  // namespace attnlab::kernels::cuda
