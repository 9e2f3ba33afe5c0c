// Inner loops of the CPU attention kernels: a register-blocked tile product, transposes, and the
// exponential. Every hot loop runs over a contiguous index with no cross-lane reduction, so the
// compiler vectorises it without reassociating sums (no -ffast-math): results stay deterministic.
// All functions are always-inline so that each ISA instantiation (isa.h) compiles them for its ISA.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "isa.h"

namespace attnlab::kernels::cpu {

template <class T>
constexpr T neg_inf() {
  return -std::numeric_limits<T>::infinity();
}

/// Rows of one register block: 4 rows x 1 line of accumulators plus a line of B fit every ISA's
/// register file.
constexpr int64_t kBlockRows = 4;
/// Tile rows are padded to a 64-byte line (16 floats, 8 doubles), a multiple of every ISA's line.
template <class T>
constexpr int64_t kPadLanes = 64 / static_cast<int64_t>(sizeof(T));

template <class T>
constexpr int64_t round_up_lanes(int64_t n) {
  return (n + kPadLanes<T> - 1) / kPadLanes<T> * kPadLanes<T>;
}

/// One register line of V bytes (16 baseline SSE2, 32 AVX2, 64 AVX-512) as a GCC/Clang vector type,
/// so that each ISA instantiation gets lines it holds natively; scalar * line broadcasts.
template <class T, int V>
struct LineOf;
#define ATTNLAB_LINE(T, V)                                 \
  template <>                                             \
  struct LineOf<T, V> {                                   \
    typedef T type __attribute__((vector_size(V)));       \
  };
ATTNLAB_LINE(float, 16)
ATTNLAB_LINE(float, 32)
ATTNLAB_LINE(float, 64)
ATTNLAB_LINE(double, 16)
ATTNLAB_LINE(double, 32)
ATTNLAB_LINE(double, 64)
#undef ATTNLAB_LINE

/// C[r][0..W) += sum_k A[r][k] B[k][0..W) for R rows, W = V / sizeof(T): R accumulator lines stay in
/// registers over k, each line of B is loaded once and used R times.
template <class T, int V, int64_t R>
ATTNLAB_INLINE void gemm_block(int64_t K, const T* __restrict A, int64_t lda, const T* __restrict B, int64_t ldb,
                               T* __restrict C, int64_t ldc) {
  using Line = typename LineOf<T, V>::type;
  Line acc[R];
  for (int64_t r = 0; r < R; ++r) std::memcpy(&acc[r], C + r * ldc, sizeof(Line));
  for (int64_t k = 0; k < K; ++k) {
    Line b;
    std::memcpy(&b, B + k * ldb, sizeof(Line));
    for (int64_t r = 0; r < R; ++r) acc[r] += A[r * lda + k] * b;
  }
  for (int64_t r = 0; r < R; ++r) std::memcpy(C + r * ldc, &acc[r], sizeof(Line));
}

/// The same for a partial block (cols < W).
template <class T>
ATTNLAB_INLINE void gemm_edge(int64_t rows, int64_t cols, int64_t K, const T* __restrict A, int64_t lda,
                              const T* __restrict B, int64_t ldb, T* __restrict C, int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const T a = A[r * lda + k];
      for (int64_t u = 0; u < cols; ++u) C[r * ldc + u] += a * B[k * ldb + u];
    }
  }
}

/// C[M x N] += A[M x K] B[K x N], all row-major with leading dimensions lda, ldb, ldc; V = the
/// register line in bytes of the calling ISA instantiation.
template <class T, int V>
ATTNLAB_INLINE void gemm_acc(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb, T* C,
                             int64_t ldc) {
  constexpr int64_t W = V / static_cast<int64_t>(sizeof(T));
  for (int64_t m0 = 0; m0 < M; m0 += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, M - m0);
    const T* a = A + m0 * lda;
    T* c = C + m0 * ldc;
    for (int64_t n0 = 0; n0 < N; n0 += W) {
      const int64_t cols = std::min(W, N - n0);
      if (cols < W) {
        gemm_edge(rows, cols, K, a, lda, B + n0, ldb, c + n0, ldc);
        continue;
      }
      switch (rows) {
        case 4: gemm_block<T, V, 4>(K, a, lda, B + n0, ldb, c + n0, ldc); break;
        case 3: gemm_block<T, V, 3>(K, a, lda, B + n0, ldb, c + n0, ldc); break;
        case 2: gemm_block<T, V, 2>(K, a, lda, B + n0, ldb, c + n0, ldc); break;
        default: gemm_block<T, V, 1>(K, a, lda, B + n0, ldb, c + n0, ldc); break;
      }
    }
  }
}

/// out[x * ld + j] = rows[j * d + x] for j < n (x < d): a tile transposed.
template <class T>
ATTNLAB_INLINE void transpose_tile(const T* __restrict rows, int64_t n, int64_t d, int64_t ld, T* __restrict out) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t x = 0; x < d; ++x) out[x * ld + j] = rows[j * d + x];
}

/// exp(x) for x <= 0 (including -inf), float: Cody-Waite reduction x = n ln2 + r and Cephes' degree-6
/// polynomial, within 2 ulp of std::exp. Branch- and call-free, so a loop of it vectorises; libm's
/// expf is a call per element.
ATTNLAB_INLINE float exp_nonpositive(float x) {
  const float cx = x < -87.0f ? -87.0f : x;  // keeps 2^n a normal number; the result is zeroed below
  const float shifter = 12582912.0f;         // 1.5 * 2^23: adding it rounds to an integer
  const float t = cx * 1.44269504088896341f + shifter;
  const float n = t - shifter;
  const float r = (cx - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  int32_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  const int32_t scale_bits = (bits - 0x4B400000 + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return x < -87.0f ? 0.0f : y * scale;
}

ATTNLAB_INLINE float exp_nonpositive_any(float x) { return exp_nonpositive(x); }
ATTNLAB_INLINE double exp_nonpositive_any(double x) { return std::exp(x); }

/// s[j] = exp(s[j] - m) for j < n (s[j] - m <= 0; -inf gives 0).
template <class T>
ATTNLAB_INLINE void exp_shifted(int64_t n, T m, T* __restrict s) {
  for (int64_t j = 0; j < n; ++j) s[j] = exp_nonpositive_any(s[j] - m);
}

template <class T>
ATTNLAB_INLINE T max_of(int64_t n, const T* s, T init) {
  for (int64_t j = 0; j < n; ++j) init = std::max(init, s[j]);
  return init;
}

template <class T>
ATTNLAB_INLINE T sum_of(int64_t n, const T* s) {
  T sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += s[j];
  return sum;
}

/// Sequential dot product (O(T d) work only: D_i and the gates, never the T x T part).
template <class T>
ATTNLAB_INLINE T dot(int64_t n, const T* __restrict a, const T* __restrict b) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// y[0..n) += a * x[0..n)
template <class T>
ATTNLAB_INLINE void axpy(int64_t n, T a, const T* __restrict x, T* __restrict y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace attnlab::kernels::cpu
