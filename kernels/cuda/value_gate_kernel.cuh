// Fused value gate (SPEC section 1): per read v_j, z_j (norm or projection form), g_j = sigmoid(z_j),
// the gated read g_j v_j and the routing bias log g_j = logsigmoid(z_j); and the backward
//   dz_j  = g_j (1 - g_j) (du_j . v_j) + (1 - g_j) dlog_j        (u = g v,  d logsigmoid = 1 - g)
//   dv_j  = g_j du_j + dz_j dz/dv,  dz/dv = beta v_j / (sqrt(d) ||v_j||) (norm; 0 at v = 0) or w_h
//   d tau_h = -beta sum_j dz_j,  d c_h = sum_j dz_j,  d w_h = sum_j dz_j v_j      (over batch, time)
// One warp per read (lane l holds elements l, l+32, ...); a block covers 64 reads of one head and
// adds its parameter-gradient share with one atomic per element.
#pragma once

#include "common.cuh"

namespace attnlab::kernels::cuda {

struct GateGeometry {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRowsPerBlock = 64;
  static constexpr int kMaxDim = 256;
  static constexpr int kPerLane = kMaxDim / 32;  // elements of one read per lane
  // backward: per warp, the partial sum of dz and the partial d w (one float per element)
  static constexpr std::size_t kBackwardSmemBytes = sizeof(float) * kWarps * (1 + kMaxDim);
};
inline constexpr int kPerLane = GateGeometry::kPerLane;

struct GateParams {
  const void* v = nullptr;
  const float* tau = nullptr;
  const float* w = nullptr;
  const float* c = nullptr;
  void* gated_v = nullptr;
  float* log_gate = nullptr;
  const void* d_gated_v = nullptr;
  const float* d_log_gate = nullptr;
  void* d_v = nullptr;
  float* d_tau = nullptr;
  float* d_w = nullptr;
  float* d_c = nullptr;
  int64_t batch = 0, heads = 0, len = 0;
  int dim = 0;
  float beta = 8.0f;
  bool norm = true;
};

/// Index of read n (of batch * len) of head h in the [B, H, T] layout.
__device__ inline int64_t read_index(const GateParams& p, int64_t h, int64_t n) {
  return (n / p.len * p.heads + h) * p.len + n % p.len;
}

template <typename T>
__device__ void load_row(const void* base, int64_t row, int dim, float (&x)[kPerLane]) {
  const T* src = static_cast<const T*>(base) + row * dim;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int c = lane + 32 * k;
    x[k] = c < dim ? to_float(src[c]) : 0.0f;
  }
}

template <typename T>
__device__ void store_row(void* base, int64_t row, int dim, const float (&x)[kPerLane]) {
  T* dst = static_cast<T*>(base) + row * dim;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k)
    if (lane + 32 * k < dim) dst[lane + 32 * k] = from_float<T>(x[k]);
}

/// Pre-activation z of one read (warp-uniform); `norm` receives ||v|| (norm gate only).
__device__ inline float gate_logit(const GateParams& p, int64_t h, const float (&v)[kPerLane], float& norm) {
  const int lane = threadIdx.x % 32;
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int c = lane + 32 * k;
    if (c < p.dim) acc += p.norm ? v[k] * v[k] : p.w[h * p.dim + c] * v[k];
  }
  acc = warp_sum(acc);
  if (!p.norm) return acc + p.c[h];
  norm = sqrtf(acc);
  return p.beta * (norm * rsqrtf(static_cast<float>(p.dim)) - p.tau[h]);
}

__device__ inline float sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

/// log sigmoid(z) without overflow for either sign of z.
__device__ inline float log_sigmoid(float z) { return fminf(z, 0.0f) - log1pf(expf(-fabsf(z))); }

template <typename T>
__global__ void __launch_bounds__(GateGeometry::kThreads) value_gate_forward_kernel(const GateParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t h = blockIdx.y, n_reads = p.batch * p.len;
  for (int r = warp; r < GateGeometry::kRowsPerBlock; r += GateGeometry::kWarps) {
    const int64_t n = static_cast<int64_t>(blockIdx.x) * GateGeometry::kRowsPerBlock + r;
    if (n >= n_reads) break;
    const int64_t row = read_index(p, h, n);
    float v[kPerLane], norm = 0.0f;
    load_row<T>(p.v, row, p.dim, v);
    const float z = gate_logit(p, h, v, norm);
    if (p.gated_v) {
      const float g = sigmoid(z);
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) v[k] *= g;
      store_row<T>(p.gated_v, row, p.dim, v);
    }
    if (p.log_gate && lane == 0) p.log_gate[row] = log_sigmoid(z);
  }
}

/// Adds the block's parameter-gradient partials (per warp: dz sum, dz v per lane) to device memory.
__device__ inline void flush_param_grads(const GateParams& p, int64_t h, float dz_sum,
                                         const float (&dw)[kPerLane]) {
  using G = GateGeometry;
  unsigned char* smem = dynamic_smem();
  float* s_dz = reinterpret_cast<float*>(smem);  // [kWarps]
  float* s_dw = s_dz + G::kWarps;                // [kWarps][kMaxDim]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) s_dz[warp] = dz_sum;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) s_dw[warp * G::kMaxDim + lane + 32 * k] = dw[k];
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < G::kWarps; ++w) total += s_dz[w];
    if (p.d_tau) atomicAdd(p.d_tau + h, -p.beta * total);
    if (p.d_c) atomicAdd(p.d_c + h, total);
  }
  if (p.d_w == nullptr) return;
  for (int c = threadIdx.x; c < p.dim; c += G::kThreads) {
    float total = 0.0f;
    for (int w = 0; w < G::kWarps; ++w) total += s_dw[w * G::kMaxDim + c];
    atomicAdd(p.d_w + h * p.dim + c, total);
  }
}

template <typename T>
__global__ void __launch_bounds__(GateGeometry::kThreads) value_gate_backward_kernel(const GateParams p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t h = blockIdx.y, n_reads = p.batch * p.len;
  float dz_sum = 0.0f, dw[kPerLane] = {};
  for (int r = warp; r < GateGeometry::kRowsPerBlock; r += GateGeometry::kWarps) {
    const int64_t n = static_cast<int64_t>(blockIdx.x) * GateGeometry::kRowsPerBlock + r;
    if (n >= n_reads) break;
    const int64_t row = read_index(p, h, n);
    float v[kPerLane], du[kPerLane] = {}, norm = 0.0f;
    load_row<T>(p.v, row, p.dim, v);
    if (p.d_gated_v) load_row<T>(p.d_gated_v, row, p.dim, du);
    const float z = gate_logit(p, h, v, norm);
    const float g = sigmoid(z), one_minus_g = sigmoid(-z);

    float du_v = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) du_v += du[k] * v[k];
    float dz = g * one_minus_g * warp_sum(du_v);
    if (p.d_log_gate) dz += p.d_log_gate[row] * one_minus_g;

    // dz/dv_c: norm gate beta v_c / (sqrt(d) ||v||), projection gate w_c.
    const float norm_coef = norm > 0.0f ? p.beta * rsqrtf(static_cast<float>(p.dim)) / norm : 0.0f;
    float dv[kPerLane];
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int c = lane + 32 * k;
      const float dz_dv = p.norm ? norm_coef * v[k] : (c < p.dim ? p.w[h * p.dim + c] : 0.0f);
      dv[k] = g * du[k] + dz * dz_dv;
      dw[k] += dz * v[k];
    }
    store_row<T>(p.d_v, row, p.dim, dv);
    dz_sum += dz;
  }
  flush_param_grads(p, h, dz_sum, dw);
}

}  // namespace attnlab::kernels::cuda
