// What the flash-attention kernels receive (filled from AttentionShape / ForwardArgs / BackwardArgs
// by flash_api.cu) and the shared-memory geometry of their tiles.
#pragma once

#include "attnlab_kernels/window_rule.h"
#include "common.cuh"

namespace attnlab::kernels::cuda {

/// One launch's tensors. Layout [B, H, T, d] contiguous; row pointers of head bh = b*H + h start at
/// bh * T * d. Optional inputs are null when their feature is off.
struct FlashParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* sink_logit = nullptr;    // [H]; null with has_sink means b_h = 0
  const float* routing_bias = nullptr;  // [B, H, Tk]
  const bool* key_mask = nullptr;       // [B, Tk]
  void* o = nullptr;                    // [B, H, Tq, d] (forward out, backward in)
  float* lse = nullptr;                 // [B, H, Tq]    (forward out, backward in)
  // backward only
  const void* d_o = nullptr;
  void* d_q = nullptr;
  void* d_k = nullptr;
  void* d_v = nullptr;
  float* d_sink_logit = nullptr;    // [H], zeroed by the launcher, summed with atomics
  float* d_routing_bias = nullptr;  // [B, H, Tk]
  float* delta = nullptr;           // [B, H, Tq] workspace: D_i = dO_i . O_i - d_lse_i
  const float* d_lse = nullptr;     // [B, H, Tq] upstream gradient of lse, may be null

  int64_t batch = 0, heads = 0, q_len = 0, k_len = 0;
  int head_dim = 0;
  float scale = 0.0f;
  bool has_sink = false;
  int64_t window = 0;      // W of a local layer; 0: none, also when it hides no key (docs/windows.md)
  int64_t keep_first = 0;  // n: keys j < n every query sees (with a window)

  /// Absolute position of query 0: queries are the last q_len of k_len positions.
  __host__ __device__ int64_t q_offset() const { return k_len - q_len; }

  /// Whether the query at position q_pos sees key j: causally, and inside its window or kept
  /// (docs/windows.md, "The rule"). The key mask and the sequence end are the addend's -inf.
  __host__ __device__ bool sees(int64_t q_pos, int64_t j) const {
    return window_sees(window, keep_first, q_pos, j);
  }

  /// The first key tile at or after k0 (tiles start at multiples of `rows`) that a query tile whose
  /// first position is q_pos0 walks: every tile holding a kept key, then from the tile holding
  /// q_pos0 - W + 1 on. A tile between holds only keys older than every window of the query tile.
  __host__ __device__ int64_t walked_key_tile(int64_t k0, int64_t q_pos0, int rows) const {
    if (window == 0 || k0 < keep_first) return k0;
    const int64_t start = q_pos0 - window + 1;
    return start > k0 ? start / rows * rows : k0;
  }

  /// One past the last query index that may see a key of the tile [k0, k0 + rows): q_len by
  /// causality, and with a window, for a tile without a kept key, the query at position
  /// k0 + rows - 1 + W - 1, the last that still has the tile's last key in its window.
  __host__ __device__ int64_t query_end(int64_t k0, int rows) const {
    if (window == 0 || k0 < keep_first) return q_len;
    const int64_t end = k0 + rows - 1 + window - q_offset();
    return end < 0 ? 0 : (end < q_len ? end : q_len);
  }
};

/// Row padding of the Q/K/V/dO tiles in elements. 16-bit: 16 bytes, keeping wmma's 32-byte aligned
/// fragment starts while shifting rows across banks. float: 1 word, so the plain-FMA strip's
/// per-lane row reads (row stride d+1 words) fall in 32 different banks.
template <typename T>
inline constexpr int kOperandPad = kTensorCore<T> ? 8 : 1;

/// Geometry shared by the forward and both backward kernels: 64-row tiles on both sides, one warp
/// per 16-row strip (4 warps). Every buffer starts 128-byte aligned.
template <typename T, int D>
struct TileGeometry {
  static_assert(D % 32 == 0, "head dim must be a multiple of 32");
  static constexpr int kRows = 64;  // query tile Br = key tile Bc
  static constexpr int kWarps = kRows / 16;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kLdOp = D + kOperandPad<T>;  // Q, K, V, dO tiles (T)
  static constexpr int kLdS = kRows + 4;            // 64-wide float logit strips
  // P or dS (T, 64 wide) overwrite the float strip they were computed from, row by row; that is
  // safe when a P row never reaches past the start of the next float row (see the kernels).
  static constexpr int kLdP = kRows + (kTensorCore<T> ? 8 : 4);
  static constexpr int kLdAcc = D + 4;  // D-wide float accumulators (O, staging)
  static constexpr std::size_t kOpBytes = align128(sizeof(T) * kRows * kLdOp);
  static constexpr std::size_t kStripBytes = align128(sizeof(float) * kRows * kLdS);
  static constexpr std::size_t kAccBytes = align128(sizeof(float) * kRows * kLdAcc);
  static_assert(kLdP * sizeof(T) <= kLdS * sizeof(float), "P row would overrun the next logit row");
  static_assert(2 * kOpBytes >= kAccBytes, "two operand tiles must hold a float accumulator tile");
};

}  // namespace attnlab::kernels::cuda
