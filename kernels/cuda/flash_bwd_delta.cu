// Launcher and instantiations of the backward's per-row D kernel (three dtypes, one small kernel).
#include "flash_bwd_delta_kernel.cuh"
#include "flash_launch.cuh"

namespace attnlab::kernels::cuda {

template <typename T>
void run_flash_bwd_delta(const FlashParams& p, cudaStream_t stream) {
  using G = DeltaGeometry;
  if (p.q_len == 0) return;
  const dim3 grid(static_cast<unsigned>((p.q_len + G::kRowsPerBlock - 1) / G::kRowsPerBlock),
                  static_cast<unsigned>(p.batch * p.heads));
  flash_bwd_delta_kernel<T><<<grid, G::kThreads, G::kSmemBytes, stream>>>(p);
  check_launch("flash_bwd_delta_kernel");
}

template void run_flash_bwd_delta<float>(const FlashParams&, cudaStream_t);
template void run_flash_bwd_delta<__half>(const FlashParams&, cudaStream_t);
template void run_flash_bwd_delta<__nv_bfloat16>(const FlashParams&, cudaStream_t);

}  // namespace attnlab::kernels::cuda
