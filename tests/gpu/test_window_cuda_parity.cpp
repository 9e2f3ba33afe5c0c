// Sliding windows on CUDA (label gpu; docs/windows.md): the fused CUDA kernels (every W and n) and
// FlashAttention-2's window (n = 0) against a float64 CPU reference under the same window, within
// flash-attention's rule (gpu_parity.h): four arms covering the sink, both gate slots and plain
// softmax, T in {65, 257} across the 64-wide tiles, W in {1, 64, 65}. Skipped, with the reason, where
// no CUDA device exists (the fused cases also where the build has no CUDA kernels).
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include "attnlab/fused_attention.h"
#include "gpu/gpu_parity.h"
#include "parity/arm_runner.h"
#include "parity/parity_helpers.h"

namespace attnlab {
namespace {

void expect_windowed_within_rule(const ArmSpec& arm, const ArmLeaves& v, at::ScalarType dtype, AttentionBackend backend,
                                 const AttentionWindow& window, const std::string& what) {
  const auto exact = parity::run_arm_windowed(arm, parity::as_leaves(v, at::kCPU, at::kDouble), AttentionBackend::reference, window);
  const auto low = parity::run_arm_windowed(arm, parity::as_leaves(v, at::kCUDA, dtype), AttentionBackend::reference, window);
  const auto got = parity::run_arm_windowed(arm, parity::as_leaves(v, at::kCUDA, dtype), backend, window);
  const double floor = dtype == at::kFloat ? 1e-5 : parity::kHalfRuleFloor;
  parity::expect_run_within_rule(got, low, exact, what, {floor, 2.0, parity::kFlashParamFactor});
}

class CudaWindowParity : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaWindowParity, FusedAndFlashWithinTheRule) {
  SKIP_WITHOUT_CUDA();
  const auto arm = parity::arm_named(GetParam());
  for (int64_t T : {65, 257}) {
    for (int64_t W : {1, 64, 65}) {
      for (int64_t n : {0, 4}) {
        const auto values = parity::arm_values(300 + T + W, 2, 2, T, 64);
        const std::string what = GetParam() + " T=" + std::to_string(T) + " W=" + std::to_string(W) + " n=" +
                                 std::to_string(n);
        if (fused_cuda_compiled()) {
          for (auto dtype : {at::kFloat, at::kBFloat16})
            expect_windowed_within_rule(arm, parity::rounded(values, dtype), dtype, AttentionBackend::fused, {W, n},
                                        what + " fused " + (dtype == at::kFloat ? "f32" : "bf16"));
        }
        if (n == 0)
          expect_windowed_within_rule(arm, parity::rounded(values, at::kBFloat16), at::kBFloat16,
                                      AttentionBackend::flash, {W, n}, what + " flash bf16");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Arms, CudaWindowParity, ::testing::Values("baseline", "sink_logit", "combo2", "renorm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace attnlab
