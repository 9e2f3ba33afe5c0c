// Causal flash-attention forward (online softmax; no T x T tensor leaves shared memory).
//
// Block = one (batch, head) and one tile of 64 queries; warp w owns query rows 16w..16w+15 of the
// tile for the whole kernel, so the softmax needs no block barrier, only __syncwarp. For each
// 64-key tile up to the last key the tile's final query can see (with a window, only the tiles
// holding kept keys and those from the window of the tile's first query on: docs/windows.md):
//   S = Q K^T (warp strip, fp32)  ->  z = scale*S + r_j (or -inf: masked, past the end, not seen)
//   m' = max(m, rowmax z);  P = exp(z - m');  l = l*exp(m - m') + rowsum P;  O = O*exp(m - m') + P V
// The sink term starts the running state at m = b_h, l = 1 (= exp(b_h - m)), so it takes part in
// the running max and a row with no visible key ends with o = 0, lse = b_h (SPEC Numerics).
#pragma once

#include "flash_params.cuh"
#include "tile_io.cuh"
#include "warp_strip.cuh"

namespace attnlab::kernels::cuda {

template <typename T, int D>
struct FwdSmem : TileGeometry<T, D> {
  using G = TileGeometry<T, D>;
  static constexpr std::size_t kQ = 0;
  static constexpr std::size_t kK = kQ + G::kOpBytes;
  static constexpr std::size_t kV = kK + G::kOpBytes;
  static constexpr std::size_t kS = kV + G::kOpBytes;     // logits, then P (T) in place
  static constexpr std::size_t kO = kS + G::kStripBytes;  // running output, fp32
  static constexpr std::size_t kAdd = kO + G::kAccBytes;  // per-key addend of the current tile
  static constexpr std::size_t kBytes = kAdd + align128(sizeof(float) * G::kRows);
};

/// Online-softmax update of one warp's 16 rows for one key tile. Reads the logit strip row by row
/// and overwrites each row with P (type T, row stride kLdP) once every lane has read it; rescales
/// the warp's O rows by exp(m - m'). Lane l handles key columns l and l + 32. A row that sees no
/// key of the tile keeps its (m, l, O): alpha = 1 (or 0 on a still empty row) and P = 0.
template <typename T, int D>
__device__ void softmax_update(float* strip, float* o_rows, const float* add, float (&m)[16], float (&l)[16],
                               const FlashParams& p, int64_t q_pos0, int64_t k0) {
  using G = TileGeometry<T, D>;
  const int lane = threadIdx.x % 32;
  T* p_rows = reinterpret_cast<T*>(strip);
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t q_pos = q_pos0 + r;  // absolute position of this query
    float z[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int c = lane + 32 * u;
      z[u] = p.sees(q_pos, k0 + c) ? strip[r * G::kLdS + c] * p.scale + add[c] : -kInf;
    }
    const float m_new = fmaxf(m[r], warp_max(fmaxf(z[0], z[1])));
    const float m_use = m_new == -kInf ? 0.0f : m_new;  // nothing visible yet: avoid inf - inf
    const float alpha = expf(m[r] - m_use);             // 0 while m was -inf
    const float p0 = expf(z[0] - m_use), p1 = expf(z[1] - m_use);
    l[r] = l[r] * alpha + warp_sum(p0 + p1);
    m[r] = m_new;
    __syncwarp();  // every lane has read logit row r before P row r (which only reaches rows <= r) lands
    p_rows[r * G::kLdP + lane] = from_float<T>(p0);
    p_rows[r * G::kLdP + lane + 32] = from_float<T>(p1);
    for (int c = lane; c < D; c += 32) o_rows[r * G::kLdAcc + c] *= alpha;
  }
}

/// o = O / l and lse = m + log l for the warp's valid rows (o = 0, lse = -inf where l = 0).
template <typename T, int D>
__device__ void write_forward_rows(const FlashParams& p, int64_t bh, int64_t row0, const float* o_rows,
                                   const float (&m)[16], const float (&l)[16]) {
  using G = TileGeometry<T, D>;
  const int lane = threadIdx.x % 32;
  T* o = static_cast<T*>(p.o) + bh * p.q_len * D;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t row = row0 + r;
    if (row >= p.q_len) break;
    const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    for (int c = lane; c < D; c += 32) o[row * D + c] = from_float<T>(o_rows[r * G::kLdAcc + c] * inv);
    if (lane == 0) p.lse[bh * p.q_len + row] = l[r] > 0.0f ? m[r] + logf(l[r]) : -kInf;
  }
}

// Each of the warp's 16 rows before its first key: running max m and sum l start at the sink
// (its logit, mass exp(0) = 1 relative to it) for a sink arm, and empty (-inf, 0) otherwise.
__device__ __forceinline__ void init_row_stats(const FlashParams& p, int64_t bh, float (&m)[16], float (&l)[16]) {
  const float sink = p.has_sink ? (p.sink_logit ? p.sink_logit[bh % p.heads] : 0.0f) : -kInf;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    m[r] = sink;
    l[r] = p.has_sink ? 1.0f : 0.0f;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(TileGeometry<T, D>::kThreads) flash_fwd_kernel(const FlashParams p) {
  using G = TileGeometry<T, D>;
  using L = FwdSmem<T, D>;
  unsigned char* smem = dynamic_smem();
  T* s_q = reinterpret_cast<T*>(smem + L::kQ);
  T* s_k = reinterpret_cast<T*>(smem + L::kK);
  T* s_v = reinterpret_cast<T*>(smem + L::kV);
  float* s_s = reinterpret_cast<float*>(smem + L::kS);
  float* s_o = reinterpret_cast<float*>(smem + L::kO);
  float* s_add = reinterpret_cast<float*>(smem + L::kAdd);

  const int warp = threadIdx.x / 32;
  const int64_t bh = blockIdx.y;
  const int64_t q0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * G::kRows;  // longest tiles first
  const T* q = static_cast<const T*>(p.q) + bh * p.q_len * D;
  const T* k = static_cast<const T*>(p.k) + bh * p.k_len * D;
  const T* v = static_cast<const T*>(p.v) + bh * p.k_len * D;

  load_rows<T, D, G::kRows, G::kThreads>(s_q, G::kLdOp, q, q0, p.q_len);
  for (int i = threadIdx.x; i < G::kRows * G::kLdAcc; i += G::kThreads) s_o[i] = 0.0f;

  float m[16], l[16];
  init_row_stats(p, bh, m, l);

  const T* q_rows = s_q + warp * 16 * G::kLdOp;
  float* strip = s_s + warp * 16 * G::kLdS;
  float* o_rows = s_o + warp * 16 * G::kLdAcc;
  const int64_t q_pos0 = p.q_offset() + q0 + warp * 16;  // absolute position of the warp's row 0
  const int64_t last_q = min(q0 + G::kRows, p.q_len) - 1;
  const int64_t k_end = min(p.k_len, p.q_offset() + last_q + 1);  // keys past it are causal-masked
  const int64_t tile_pos0 = p.q_offset() + q0;  // the tile's first query, whose window starts first

  for (int64_t k0 = p.walked_key_tile(0, tile_pos0, G::kRows); k0 < k_end;
       k0 = p.walked_key_tile(k0 + G::kRows, tile_pos0, G::kRows)) {
    __syncthreads();  // the previous tile's K, V, addend are no longer read (and s_q, s_o are ready)
    load_rows<T, D, G::kRows, G::kThreads>(s_k, G::kLdOp, k, k0, p.k_len);
    load_rows<T, D, G::kRows, G::kThreads>(s_v, G::kLdOp, v, k0, p.k_len);
    load_key_addend<G::kRows, G::kThreads>(s_add, p, bh, k0);
    __syncthreads();

    WarpStrip<T, G::kRows> s;
    s.zero();
    s.template add_abt<D>(q_rows, G::kLdOp, s_k, G::kLdOp);
    s.store(strip, G::kLdS);
    __syncwarp();
    softmax_update<T, D>(strip, o_rows, s_add, m, l, p, q_pos0, k0);
    __syncwarp();  // P and the rescaled O rows are visible to the whole warp

    WarpStrip<T, D> o;
    o.load(o_rows, G::kLdAcc);
    o.template add_ab<G::kRows>(reinterpret_cast<const T*>(strip), G::kLdP, s_v, G::kLdOp);
    __syncwarp();  // every lane has read its O fragments before any lane overwrites them
    o.store(o_rows, G::kLdAcc);
  }
  __syncthreads();  // also covers the zero fill of s_o when no key tile ran
  write_forward_rows<T, D>(p, bh, q0 + warp * 16, o_rows, m, l);
}

}  // namespace attnlab::kernels::cuda
