// D_i = dO_i . O_i - dlse_i for every query row (the backward's per-row softmax correction; an
// upstream gradient of lse_i adds dlse_i P_ij to every dz_ij since d lse_i / d z_ij = P_ij), and the
// sink logit's gradient d b_h = -sum_{b,i} p_i D_i with phantom mass p_i = exp(b_h - lse_i): the
// sink is a key with no value, so its dP is 0 and its dS is p_i (0 - D_i).
// One warp per row; a block covers 64 rows of one (batch, head) and adds its share of d b_h with
// one atomic (the launcher zeroes d_sink_logit first).
#pragma once

#include "flash_params.cuh"

namespace attnlab::kernels::cuda {

struct DeltaGeometry {
  static constexpr int kRowsPerBlock = 64;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr std::size_t kSmemBytes = sizeof(float) * kWarps;  // one partial d b_h per warp
};

template <typename T>
__global__ void __launch_bounds__(DeltaGeometry::kThreads) flash_bwd_delta_kernel(const FlashParams p) {
  using G = DeltaGeometry;
  unsigned char* smem = dynamic_smem();
  float* warp_sink = reinterpret_cast<float*>(smem);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t bh = blockIdx.y;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * G::kRowsPerBlock;
  const bool want_sink = p.has_sink && p.d_sink_logit != nullptr;
  const float sink = p.sink_logit ? p.sink_logit[bh % p.heads] : 0.0f;

  float sink_part = 0.0f;
  for (int r = warp; r < G::kRowsPerBlock; r += G::kWarps) {
    const int64_t i = row0 + r;
    if (i >= p.q_len) break;
    const int64_t base = (bh * p.q_len + i) * p.head_dim;
    float dot = 0.0f;
    for (int c = lane; c < p.head_dim; c += 32)
      dot +=
          to_float(static_cast<const T*>(p.d_o)[base + c]) * to_float(static_cast<const T*>(p.o)[base + c]);
    dot = warp_sum(dot) - (p.d_lse ? p.d_lse[bh * p.q_len + i] : 0.0f);
    if (lane == 0) p.delta[bh * p.q_len + i] = dot;
    if (want_sink) sink_part -= expf(sink - p.lse[bh * p.q_len + i]) * dot;
  }
  if (!want_sink) return;
  if (lane == 0) warp_sink[warp] = sink_part;  // lane-uniform: dot came from warp_sum
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < G::kWarps; ++w) total += warp_sink[w];
    atomicAdd(p.d_sink_logit + bh % p.heads, total);
  }
}

}  // namespace attnlab::kernels::cuda
