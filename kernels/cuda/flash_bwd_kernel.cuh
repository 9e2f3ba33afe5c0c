// Causal flash-attention backward: recomputes P = exp(z - lse) tile by tile (no T x T buffer).
// With D_i = dO_i . O_i (flash_bwd_delta.cuh) and z_ij = scale * q_i . k_j + r_j:
//   dV_j = sum_i P_ij dO_i          dP_ij = dO_i . v_j          dS_ij = P_ij (dP_ij - D_i)
//   dK_j = scale sum_i dS_ij q_i    dQ_i  = scale sum_j dS_ij k_j    d r_j = sum_i dS_ij
// Two kernels, so that every output has one owner and no atomics are needed: flash_bwd_kv_kernel
// (block = 64 keys, loops over the queries that see them; warp w owns keys 16w..16w+15) and
// flash_bwd_q_kernel (block = 64 queries, loops over their keys; warp w owns queries 16w..).
// The price is recomputing S and dP in both (7 tile products instead of 5). With a window
// (docs/windows.md) both skip a (query tile, key tile) pair by the forward's rule and give P = 0
// to a key a query does not see: the q kernel walks the forward's key tiles, the kv kernel the
// query tiles that start by the last query whose window holds the key tile (all of them for a
// tile holding a kept key).
#pragma once

#include "flash_params.cuh"
#include "tile_io.cuh"
#include "warp_strip.cuh"

namespace attnlab::kernels::cuda {

template <typename T, int D>
struct BwdSmem : TileGeometry<T, D> {
  using G = TileGeometry<T, D>;
  static constexpr std::size_t kK = 0;
  static constexpr std::size_t kV = kK + G::kOpBytes;  // K, V adjacent: q kernel's staging area
  static constexpr std::size_t kQ = kV + G::kOpBytes;
  static constexpr std::size_t kDo = kQ + G::kOpBytes;     // Q, dO adjacent: kv kernel's staging area
  static constexpr std::size_t kS = kDo + G::kOpBytes;     // logits, then P (T) in place
  static constexpr std::size_t kDp = kS + G::kStripBytes;  // dP, then dS (T) in place
  static constexpr std::size_t kVec = align128(sizeof(float) * G::kRows);
  static constexpr std::size_t kLse = kDp + G::kStripBytes;
  static constexpr std::size_t kDelta = kLse + kVec;
  static constexpr std::size_t kAdd = kDelta + kVec;
  static constexpr std::size_t kBytes = kAdd + kVec;
};

/// lse[r], delta[r] of queries row0 + r. A query past the end, or one with no visible key and no
/// sink (lse = -inf), gets lse = +inf so that every P of its row is exp(z - inf) = 0.
template <int kRows, int kThreads>
__device__ void load_row_stats(float* lse, float* delta, const FlashParams& p, int64_t bh, int64_t row0) {
  for (int r = threadIdx.x; r < kRows; r += kThreads) {
    const int64_t i = row0 + r;
    const bool valid = i < p.q_len;
    const float x = valid ? p.lse[bh * p.q_len + i] : kInf;
    lse[r] = x == -kInf ? kInf : x;
    delta[r] = valid ? p.delta[bh * p.q_len + i] : 0.0f;
  }
}

/// Rows r of a staged float strip, times `scale`, into dst (one head's [n_rows, D]) at row0 + r.
template <typename T, int D>
__device__ void write_scaled_rows(T* dst, int64_t row0, int64_t n_rows, const float* rows, float scale) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    if (row0 + r >= n_rows) break;
    for (int c = lane; c < D; c += 32)
      dst[(row0 + r) * D + c] = from_float<T>(rows[r * TileGeometry<T, D>::kLdAcc + c] * scale);
  }
}

/// kv kernel, one warp: rows are its 16 keys (absolute index key0 + r), columns the 64 queries of
/// the tile (absolute position q_pos0 + c). Overwrites the S strip with P and the dP strip with dS
/// (type T), row by row after every lane has read the row; adds each row's sum of dS to dr[r].
template <typename T, int D>
__device__ void kv_probs_and_grads(float* s, float* dp, const float* add_rows, const float* lse,
                                   const float* delta, const FlashParams& p, int64_t key0, int64_t q_pos0,
                                   float (&dr)[16]) {
  using G = TileGeometry<T, D>;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    float pv[2], ds[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int c = lane + 32 * u;
      const float z = p.sees(q_pos0 + c, key0 + r) ? s[r * G::kLdS + c] * p.scale + add_rows[r] : -kInf;
      pv[u] = expf(z - lse[c]);
      ds[u] = pv[u] * (dp[r * G::kLdS + c] - delta[c]);
    }
    dr[r] += ds[0] + ds[1];
    __syncwarp();  // row r of both strips is read before the narrower T rows land on it
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      reinterpret_cast<T*>(s)[r * G::kLdP + lane + 32 * u] = from_float<T>(pv[u]);
      reinterpret_cast<T*>(dp)[r * G::kLdP + lane + 32 * u] = from_float<T>(ds[u]);
    }
  }
}

/// q kernel, one warp: rows are its 16 queries (absolute position q_pos0 + r), columns the 64 keys
/// of the tile (absolute index k0 + c). Overwrites the S strip with dS (type T), row by row.
template <typename T, int D>
__device__ void q_grads(float* s, const float* dp, const float* add, const float* lse_rows,
                        const float* delta_rows, const FlashParams& p, int64_t q_pos0, int64_t k0) {
  using G = TileGeometry<T, D>;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    float ds[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int c = lane + 32 * u;
      const float z = p.sees(q_pos0 + r, k0 + c) ? s[r * G::kLdS + c] * p.scale + add[c] : -kInf;
      ds[u] = expf(z - lse_rows[r]) * (dp[r * G::kLdS + c] - delta_rows[r]);
    }
    __syncwarp();
#pragma unroll
    for (int u = 0; u < 2; ++u) reinterpret_cast<T*>(s)[r * G::kLdP + lane + 32 * u] = from_float<T>(ds[u]);
  }
}

// The key-side kernel's epilogue: this warp's 16 keys from key0 on get dV, dK (times the softmax
// scale) and, for a routed arm, d r_j (the lanes' partial sums added). The Q tile's shared memory,
// free once every warp is past the query loop, stages the rows.
template <typename T, int D>
__device__ __forceinline__ void store_key_grads(const FlashParams& p, unsigned char* smem, int warp, int lane,
                                                int64_t bh, int64_t key0, WarpStrip<T, D>& dk,
                                                WarpStrip<T, D>& dv, const float (&dr)[16]) {
  using G = TileGeometry<T, D>;
  using L = BwdSmem<T, D>;
  const int64_t head_k = bh * p.k_len * D;
  float* stage = reinterpret_cast<float*>(smem + L::kQ) + warp * 16 * G::kLdAcc;
  dv.store(stage, G::kLdAcc);
  __syncwarp();
  write_scaled_rows<T, D>(static_cast<T*>(p.d_v) + head_k, key0, p.k_len, stage, 1.0f);
  __syncwarp();
  dk.store(stage, G::kLdAcc);
  __syncwarp();
  write_scaled_rows<T, D>(static_cast<T*>(p.d_k) + head_k, key0, p.k_len, stage, p.scale);
  if (p.d_routing_bias == nullptr) return;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const float total = warp_sum(dr[r]);
    if (lane == 0 && key0 + r < p.k_len) p.d_routing_bias[bh * p.k_len + key0 + r] = total;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(TileGeometry<T, D>::kThreads) flash_bwd_kv_kernel(const FlashParams p) {
  using G = TileGeometry<T, D>;
  using L = BwdSmem<T, D>;
  unsigned char* smem = dynamic_smem();
  T* s_k = reinterpret_cast<T*>(smem + L::kK);
  T* s_v = reinterpret_cast<T*>(smem + L::kV);
  T* s_q = reinterpret_cast<T*>(smem + L::kQ);
  T* s_do = reinterpret_cast<T*>(smem + L::kDo);
  float* s_lse = reinterpret_cast<float*>(smem + L::kLse);
  float* s_delta = reinterpret_cast<float*>(smem + L::kDelta);
  float* s_add = reinterpret_cast<float*>(smem + L::kAdd);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t bh = blockIdx.y;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * G::kRows;  // early keys have the most queries
  const int64_t head_k = bh * p.k_len * D, head_q = bh * p.q_len * D;
  load_rows<T, D, G::kRows, G::kThreads>(s_k, G::kLdOp, static_cast<const T*>(p.k) + head_k, k0, p.k_len);
  load_rows<T, D, G::kRows, G::kThreads>(s_v, G::kLdOp, static_cast<const T*>(p.v) + head_k, k0, p.k_len);
  load_key_addend<G::kRows, G::kThreads>(s_add, p, bh, k0);

  const T* k_rows = s_k + warp * 16 * G::kLdOp;
  const T* v_rows = s_v + warp * 16 * G::kLdOp;
  float* s_strip = reinterpret_cast<float*>(smem + L::kS) + warp * 16 * G::kLdS;
  float* dp_strip = reinterpret_cast<float*>(smem + L::kDp) + warp * 16 * G::kLdS;
  WarpStrip<T, D> dk, dv;
  dk.zero();
  dv.zero();
  float dr[16] = {};

  // Query i sits at q_offset + i and sees key k0 once q_offset + i >= k0; with a window, a tile
  // without a kept key drops out of the windows of the queries past query_end.
  const int64_t i_first = k0 > p.q_offset() ? k0 - p.q_offset() : 0;
  const int64_t i_end = p.query_end(k0, G::kRows);
  for (int64_t i0 = i_first; i0 < i_end; i0 += G::kRows) {
    __syncthreads();  // the previous query tile is no longer read (and K, V, addend are ready)
    load_rows<T, D, G::kRows, G::kThreads>(s_q, G::kLdOp, static_cast<const T*>(p.q) + head_q, i0, p.q_len);
    load_rows<T, D, G::kRows, G::kThreads>(s_do, G::kLdOp, static_cast<const T*>(p.d_o) + head_q, i0,
                                           p.q_len);
    load_row_stats<G::kRows, G::kThreads>(s_lse, s_delta, p, bh, i0);
    __syncthreads();

    WarpStrip<T, G::kRows> acc;  // S^T = K Q^T, then dP^T = V dO^T (rows: keys, columns: queries)
    acc.zero();
    acc.template add_abt<D>(k_rows, G::kLdOp, s_q, G::kLdOp);
    acc.store(s_strip, G::kLdS);
    acc.zero();
    acc.template add_abt<D>(v_rows, G::kLdOp, s_do, G::kLdOp);
    acc.store(dp_strip, G::kLdS);
    __syncwarp();
    kv_probs_and_grads<T, D>(s_strip, dp_strip, s_add + warp * 16, s_lse, s_delta, p, k0 + warp * 16,
                             p.q_offset() + i0, dr);
    __syncwarp();
    dv.template add_ab<G::kRows>(reinterpret_cast<const T*>(s_strip), G::kLdP, s_do, G::kLdOp);
    dk.template add_ab<G::kRows>(reinterpret_cast<const T*>(dp_strip), G::kLdP, s_q, G::kLdOp);
  }
  __syncthreads();  // every warp is done with Q and dO: their tiles become staging rows
  store_key_grads<T, D>(p, smem, warp, lane, bh, k0 + warp * 16, dk, dv, dr);
}

template <typename T, int D>
__global__ void __launch_bounds__(TileGeometry<T, D>::kThreads) flash_bwd_q_kernel(const FlashParams p) {
  using G = TileGeometry<T, D>;
  using L = BwdSmem<T, D>;
  unsigned char* smem = dynamic_smem();
  T* s_k = reinterpret_cast<T*>(smem + L::kK);
  T* s_v = reinterpret_cast<T*>(smem + L::kV);
  T* s_q = reinterpret_cast<T*>(smem + L::kQ);
  T* s_do = reinterpret_cast<T*>(smem + L::kDo);
  float* s_lse = reinterpret_cast<float*>(smem + L::kLse);
  float* s_delta = reinterpret_cast<float*>(smem + L::kDelta);
  float* s_add = reinterpret_cast<float*>(smem + L::kAdd);

  const int warp = threadIdx.x / 32;
  const int64_t bh = blockIdx.y;
  const int64_t q0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * G::kRows;  // longest first
  const int64_t head_k = bh * p.k_len * D, head_q = bh * p.q_len * D;
  load_rows<T, D, G::kRows, G::kThreads>(s_q, G::kLdOp, static_cast<const T*>(p.q) + head_q, q0, p.q_len);
  load_rows<T, D, G::kRows, G::kThreads>(s_do, G::kLdOp, static_cast<const T*>(p.d_o) + head_q, q0, p.q_len);
  load_row_stats<G::kRows, G::kThreads>(s_lse, s_delta, p, bh, q0);

  const T* q_rows = s_q + warp * 16 * G::kLdOp;
  const T* do_rows = s_do + warp * 16 * G::kLdOp;
  float* s_strip = reinterpret_cast<float*>(smem + L::kS) + warp * 16 * G::kLdS;
  float* dp_strip = reinterpret_cast<float*>(smem + L::kDp) + warp * 16 * G::kLdS;
  WarpStrip<T, D> dq;
  dq.zero();

  const int64_t q_pos0 = p.q_offset() + q0 + warp * 16;
  const int64_t last_q = min(q0 + G::kRows, p.q_len) - 1;
  const int64_t k_end = min(p.k_len, p.q_offset() + last_q + 1);
  const int64_t tile_pos0 = p.q_offset() + q0;  // the forward's key tiles for this query tile
  for (int64_t k0 = p.walked_key_tile(0, tile_pos0, G::kRows); k0 < k_end;
       k0 = p.walked_key_tile(k0 + G::kRows, tile_pos0, G::kRows)) {
    __syncthreads();  // the previous key tile is no longer read (and Q, dO, row stats are ready)
    load_rows<T, D, G::kRows, G::kThreads>(s_k, G::kLdOp, static_cast<const T*>(p.k) + head_k, k0, p.k_len);
    load_rows<T, D, G::kRows, G::kThreads>(s_v, G::kLdOp, static_cast<const T*>(p.v) + head_k, k0, p.k_len);
    load_key_addend<G::kRows, G::kThreads>(s_add, p, bh, k0);
    __syncthreads();

    WarpStrip<T, G::kRows> acc;  // S = Q K^T, then dP = dO V^T (rows: queries, columns: keys)
    acc.zero();
    acc.template add_abt<D>(q_rows, G::kLdOp, s_k, G::kLdOp);
    acc.store(s_strip, G::kLdS);
    acc.zero();
    acc.template add_abt<D>(do_rows, G::kLdOp, s_v, G::kLdOp);
    acc.store(dp_strip, G::kLdS);
    __syncwarp();
    q_grads<T, D>(s_strip, dp_strip, s_add, s_lse + warp * 16, s_delta + warp * 16, p, q_pos0, k0);
    __syncwarp();
    dq.template add_ab<G::kRows>(reinterpret_cast<const T*>(s_strip), G::kLdP, s_k, G::kLdOp);
  }
  __syncthreads();  // every warp is done with K and V: their tiles become staging rows

  float* stage = reinterpret_cast<float*>(smem + L::kK) + warp * 16 * G::kLdAcc;
  dq.store(stage, G::kLdAcc);
  __syncwarp();
  write_scaled_rows<T, D>(static_cast<T*>(p.d_q) + head_q, q0 + warp * 16, p.q_len, stage, p.scale);
}

}  // namespace attnlab::kernels::cuda
