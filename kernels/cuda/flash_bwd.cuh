// Launchers of the two backward kernels; included only by the flash_bwd_hdim*_*.cu files.
#pragma once

#include "flash_bwd_kernel.cuh"
#include "flash_launch.cuh"

namespace attnlab::kernels::cuda {

template <typename Kernel>
void launch_bwd(Kernel kernel, const char* name, std::size_t smem, int64_t len, const FlashParams& p,
                int threads, int rows, cudaStream_t stream) {
  if (len == 0) return;  // no query: the kv kernel still ran and wrote zero key gradients
  check_cuda(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
      name);
  const dim3 grid(static_cast<unsigned>((len + rows - 1) / rows), static_cast<unsigned>(p.batch * p.heads));
  kernel<<<grid, threads, smem, stream>>>(p);
  check_launch(name);
}

template <typename T, int D>
void run_flash_bwd(const FlashParams& p, cudaStream_t stream) {
  using G = TileGeometry<T, D>;
  constexpr std::size_t smem = BwdSmem<T, D>::kBytes;
  launch_bwd(flash_bwd_kv_kernel<T, D>, "flash_bwd_kv_kernel", smem, p.k_len, p, G::kThreads, G::kRows,
             stream);
  launch_bwd(flash_bwd_q_kernel<T, D>, "flash_bwd_q_kernel", smem, p.q_len, p, G::kThreads, G::kRows, stream);
}

}  // namespace attnlab::kernels::cuda
