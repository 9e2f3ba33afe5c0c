// The launch functions each instantiation file (flash_{fwd,bwd}_hdim*_*.cu) defines, one per
// (dtype, head dim), and the dispatcher (flash_api.cu) picks from at run time.
#pragma once

#include "flash_params.cuh"

namespace attnlab::kernels::cuda {

template <typename T, int D>
void run_flash_fwd(const FlashParams& p, cudaStream_t stream);

/// dK, dV, d routing bias (one pass over keys) and dQ (one pass over queries); p.delta must hold D_i.
template <typename T, int D>
void run_flash_bwd(const FlashParams& p, cudaStream_t stream);

/// D_i = dO_i . O_i into p.delta, and d b_h = -sum_i exp(b_h - lse_i) D_i into p.d_sink_logit.
template <typename T>
void run_flash_bwd_delta(const FlashParams& p, cudaStream_t stream);

}  // namespace attnlab::kernels::cuda
