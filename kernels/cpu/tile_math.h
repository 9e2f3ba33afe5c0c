// Inner loops of the CPU attention kernels. Every hot loop runs over a contiguous index with no
// reduction, so the compiler vectorises it without reassociating sums (no -ffast-math needed):
// scores are built as s[j] += q[x] * kT[x][j] over a transposed key tile, reads as acc[x] += p * v[x].
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace attnlab::kernels::cpu {

template <class T>
constexpr T neg_inf() {
  return -std::numeric_limits<T>::infinity();
}

/// y[0..n) += a * x[0..n)
template <class T>
inline void axpy(int64_t n, T a, const T* __restrict x, T* __restrict y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

/// y[0..n) *= a
template <class T>
inline void scale_in_place(int64_t n, T a, T* __restrict y) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

/// Sequential dot product (O(T d) work only: D_i and the gates, never the T x T part).
template <class T>
inline T dot(int64_t n, const T* __restrict a, const T* __restrict b) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

/// out[x * ld + j] = rows[j * d + x] for j < n: a tile of n rows of width d, transposed so that the
/// score loop below runs over keys.
template <class T>
inline void transpose_tile(const T* __restrict rows, int64_t n, int64_t d, int64_t ld, T* __restrict out) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t x = 0; x < d; ++x) out[x * ld + j] = rows[j * d + x];
}

/// s[j] = base[j] + sum_x a[x] * tT[x * ld + j] for j < n (base null = 0): one row of a tile product
/// against a transposed tile.
template <class T>
inline void row_times_tile(const T* __restrict a, const T* __restrict tT, int64_t d, int64_t ld, int64_t n,
                           const T* __restrict base, T* __restrict s) {
  for (int64_t j = 0; j < n; ++j) s[j] = base ? base[j] : T(0);
  for (int64_t x = 0; x < d; ++x) {
    const T ax = a[x];
    const T* __restrict row = tT + x * ld;
    for (int64_t j = 0; j < n; ++j) s[j] += ax * row[j];
  }
}

template <class T>
inline T max_of(int64_t n, const T* s, T init) {
  for (int64_t j = 0; j < n; ++j) init = std::max(init, s[j]);
  return init;
}

/// s[j] = exp(s[j] - m) in place, returns the sum (masked keys hold -inf and give 0).
template <class T>
inline T exp_shifted(int64_t n, T m, T* s) {
  for (int64_t j = 0; j < n; ++j) s[j] = std::exp(s[j] - m);
  T sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += s[j];
  return sum;
}

}  // namespace attnlab::kernels::cpu
