// A warp's 16 x N float accumulator strip and the two products the attention kernels need:
//   add_abt:  C += A B^T   (A: 16 x K, B: N x K, both row-major in shared memory)
//   add_ab:   C += A B     (A: 16 x K, B: K x N, both row-major in shared memory)
// plus load/store of C to a row-major float strip in shared memory. The register layout of C is
// private to each version; kernels only ever see C through load/store, so the tensor-core version
// (wmma, opaque fragment layout) and the plain-FMA version (float inputs) are interchangeable.
#pragma once

#include <mma.h>

#include "common.cuh"

namespace attnlab::kernels::cuda {

template <typename T, int N, bool kTC = kTensorCore<T>>
struct WarpStrip;

/// Tensor-core version: N/16 wmma 16x16 accumulator fragments, 16x16x16 products.
/// Needs: A, B, C pointers 32-byte aligned; lda, ldb multiples of 8 elements, ldc of 4; K % 16 == 0.
template <typename T, int N>
struct WarpStrip<T, N, true> {
  static_assert(N % 16 == 0, "strip width must be a multiple of 16");
  static constexpr int kFrags = N / 16;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> frag[kFrags];

  __device__ void zero() {
#pragma unroll
    for (int j = 0; j < kFrags; ++j) nvcuda::wmma::fill_fragment(frag[j], 0.0f);
  }

  template <int K>
  __device__ void add_abt(const T* a, int lda, const T* b, int ldb) {
    using namespace nvcuda;
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, a + kk, lda);
#pragma unroll
      for (int j = 0; j < kFrags; ++j) {
        // B^T's 16x16 block (k = kk.., n = 16j..) is B's rows 16j.. read column-major.
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
        wmma::load_matrix_sync(fb, b + static_cast<std::ptrdiff_t>(16 * j) * ldb + kk, ldb);
        wmma::mma_sync(frag[j], fa, fb, frag[j]);
      }
    }
  }

  template <int K>
  __device__ void add_ab(const T* a, int lda, const T* b, int ldb) {
    using namespace nvcuda;
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, a + kk, lda);
#pragma unroll
      for (int j = 0; j < kFrags; ++j) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fb, b + static_cast<std::ptrdiff_t>(kk) * ldb + 16 * j, ldb);
        wmma::mma_sync(frag[j], fa, fb, frag[j]);
      }
    }
  }

  __device__ void store(float* c, int ldc) const {
#pragma unroll
    for (int j = 0; j < kFrags; ++j)
      nvcuda::wmma::store_matrix_sync(c + 16 * j, frag[j], ldc, nvcuda::wmma::mem_row_major);
  }

  __device__ void load(const float* c, int ldc) {
#pragma unroll
    for (int j = 0; j < kFrags; ++j)
      nvcuda::wmma::load_matrix_sync(frag[j], c + 16 * j, ldc, nvcuda::wmma::mem_row_major);
  }
};

/// Plain-FMA version for float: lane l owns columns l, l+32, ... of all 16 rows. A's reads are
/// warp-wide broadcasts; B's are one word per lane (conflict-free when ldb is odd, see kOperandPad).
template <typename T, int N>
struct WarpStrip<T, N, false> {
  static_assert(N % 32 == 0, "strip width must be a multiple of 32");
  static constexpr int kCols = N / 32;
  float acc[16][kCols];

  __device__ void zero() {
#pragma unroll
    for (int r = 0; r < 16; ++r)
#pragma unroll
      for (int u = 0; u < kCols; ++u) acc[r][u] = 0.0f;
  }

  template <int K>
  __device__ void add_abt(const T* a, int lda, const T* b, int ldb) {
    const int lane = threadIdx.x % 32;
#pragma unroll 2
    for (int k = 0; k < K; ++k) {
      float bv[kCols];
#pragma unroll
      for (int u = 0; u < kCols; ++u) bv[u] = b[(lane + 32 * u) * ldb + k];
      fma_row_broadcast(a + k, lda, bv);
    }
  }

  template <int K>
  __device__ void add_ab(const T* a, int lda, const T* b, int ldb) {
    const int lane = threadIdx.x % 32;
#pragma unroll 2
    for (int k = 0; k < K; ++k) {
      float bv[kCols];
#pragma unroll
      for (int u = 0; u < kCols; ++u) bv[u] = b[k * ldb + lane + 32 * u];
      fma_row_broadcast(a + k, lda, bv);
    }
  }

  __device__ void store(float* c, int ldc) const {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < 16; ++r)
#pragma unroll
      for (int u = 0; u < kCols; ++u) c[r * ldc + lane + 32 * u] = acc[r][u];
  }

  __device__ void load(const float* c, int ldc) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < 16; ++r)
#pragma unroll
      for (int u = 0; u < kCols; ++u) acc[r][u] = c[r * ldc + lane + 32 * u];
  }

 private:
  // acc[r][u] += a[r][k] * bv[u] for the one k that `a_col` points at.
  __device__ void fma_row_broadcast(const T* a_col, int lda, const float (&bv)[kCols]) {
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const float av = a_col[r * lda];
#pragma unroll
      for (int u = 0; u < kCols; ++u) acc[r][u] = fmaf(av, bv[u], acc[r][u]);
    }
  }
};

}  // namespace attnlab::kernels::cuda
