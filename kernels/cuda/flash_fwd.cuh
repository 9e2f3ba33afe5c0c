// Launcher of the forward kernel; included only by the flash_fwd_hdim*_*.cu instantiation files.
#pragma once

#include "flash_fwd_kernel.cuh"
#include "flash_launch.cuh"

namespace attnlab::kernels::cuda {

template <typename T, int D>
void run_flash_fwd(const FlashParams& p, cudaStream_t stream) {
  using G = TileGeometry<T, D>;
  constexpr std::size_t smem = FwdSmem<T, D>::kBytes;
  check_cuda(cudaFuncSetAttribute(flash_fwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(smem)),
             "flash_fwd_kernel: shared memory size");
  const dim3 grid(static_cast<unsigned>((p.q_len + G::kRows - 1) / G::kRows),
                  static_cast<unsigned>(p.batch * p.heads));
  flash_fwd_kernel<T, D><<<grid, G::kThreads, smem, stream>>>(p);
  check_launch("flash_fwd_kernel");
}

}  // namespace attnlab::kernels::cuda
