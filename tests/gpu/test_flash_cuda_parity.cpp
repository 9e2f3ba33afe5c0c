// The flash backend on CUDA (FlashAttention-2 through at::_scaled_dot_product_flash_attention, label
// gpu): every in-attention arm in bfloat16 and float16, head dims 64 and 128, T in {1, 2, 63, 64,
// 65, 257}, ordinary and extreme parameters (b_h = +-100, gate logits +-200) and keys sharing a large
// component (parity::with_shared_key_component), o, lse, phantom mass
// and every gradient of a loss reading o and lse; determinism of the reductions the backend claims; the whole model under bf16 autocast.
// Skipped, with the reason, where no CUDA device exists.
//
// Tolerance rule (flash-attention's): against a float64 CPU reference on the same rounded inputs, the
// flash error may be at most twice the error of the composed-op reference run on the GPU in the same
// low precision, plus a floor for when both are tiny (parity::expect_within_rule, arm_runner.h).
#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <torch/cuda.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "attnlab/device.h"
#include "attnlab/flash_attention.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "gpu/gpu_parity.h"
#include "parity/arm_runner.h"
#include "parity/parity_helpers.h"

namespace attnlab {
namespace {

using gpu::Inputs;

parity::ArmLeaves values(int64_t T, int64_t d, Inputs inputs) { return gpu::arm_case(900 + T + d, T, d, inputs); }

class CudaFlashArmParity : public ::testing::TestWithParam<std::tuple<std::string, at::ScalarType>> {};

TEST_P(CudaFlashArmParity, FlashWithinTwiceTheReferenceError) {
  SKIP_WITHOUT_CUDA();
  const auto& [name, dtype] = GetParam();
  const auto arm = parity::arm_named(name);
  // Keys that share a large component (parity::with_shared_key_component): FlashAttention-2 takes D_i
  // from the rounded o and rounds dS before dq = scale dS k, as the CPU kernel does, which fails this
  // class on CPU (tests/parity/test_half_shared_keys.cpp); this is where the GPU kernel shows whether it does.
  for (auto inputs : {Inputs::ordinary, Inputs::extreme, Inputs::shared_keys}) {
    for (int64_t d : {64, 128}) {
      for (int64_t T : {1, 2, 63, 64, 65, 257}) {
        // The loss reads lse too, so the lse-gradient path runs (phantom-mass probes differentiate it).
        gpu::expect_backend_within_rule(arm, parity::rounded(values(T, d, inputs), dtype), dtype, AttentionBackend::flash,
                                        name + " " + gpu::dtype_name(dtype) + " d=" + std::to_string(d) +
                                            " T=" + std::to_string(T) +
                                            gpu::inputs_name(inputs));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllArms, CudaFlashArmParity,
                         ::testing::Combine(::testing::ValuesIn(parity::in_attention_arm_names()),
                                            ::testing::Values(at::kBFloat16, at::kHalf)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + gpu::dtype_name(std::get<1>(info.param));
                         });

// The lse-gradient path (a loss reading lse, as phantom-mass probes do) and the routing bias
// together, at the kernel level.
TEST(CudaFlashAttention, GradientThroughLseWithSinkAndRoutingBias) {
  SKIP_WITHOUT_CUDA();
  parity::Case c;
  c.Tq = c.Tk = 129, c.d = 64, c.dtype = at::kDouble, c.sink = true, c.bias = true;
  const auto src = parity::make_leaves(c);
  auto on = [&](const at::Device& device, at::ScalarType type) {
    auto leaf = [&](const at::Tensor& t, at::ScalarType ty) { return t.detach().to(ty).to(device).requires_grad_(true); };
    parity::Leaves l;
    l.q = leaf(src.q.to(at::kBFloat16), type), l.k = leaf(src.k.to(at::kBFloat16), type);
    l.v = leaf(src.v.to(at::kBFloat16), type), l.bias = leaf(src.bias, at::kFloat), l.sink = leaf(src.sink, at::kFloat);
    return l;
  };
  enum class Side { reference, flash, rounding_p };
  auto run = [](const parity::Leaves& l, Side side) {
    AttentionInputs in{l.q, l.k, l.v, l.bias, l.sink, {}};
    auto out = side == Side::flash       ? flash_attention(in)
               : side == Side::reference ? reference_attention(in)
                                         : parity::attention_rounding_p(in);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    const auto R = at::normal(0.0, 1.0, out.o.sizes(), gen, f64).to(out.o.options());
    const auto S = at::normal(0.0, 1.0, out.lse.sizes(), gen, f64).to(out.lse.options());
    ((out.o * R).sum() + (out.lse * S).sum()).backward();
    auto host = [](const at::Tensor& t) { return t.detach().to(at::kCPU, at::kDouble); };
    return std::vector<at::Tensor>{host(out.o),      host(out.lse),     host(l.q.grad()), host(l.k.grad()),
                                   host(l.v.grad()), host(l.bias.grad()), host(l.sink.grad())};
  };
  const auto exact = run(on(at::kCPU, at::kDouble), Side::reference);
  const auto low = run(on(at::kCUDA, at::kBFloat16), Side::reference);
  const auto rounding_p = run(on(at::kCUDA, at::kBFloat16), Side::rounding_p);
  const auto flash = run(on(at::kCUDA, at::kBFloat16), Side::flash);
  const char* names[] = {"o", "lse", "dq", "dk", "dv", "d routing_bias", "d b_h"};
  for (size_t i = 0; i < exact.size(); ++i) {
    // As parity::expect_run_within_rule: gradients against the larger of the two yardsticks' errors.
    double yardstick = parity::normalised_error(low[i], exact[i]);
    if (i >= 2) yardstick = std::max(yardstick, parity::normalised_error(rounding_p[i], exact[i]));
    const double factor = i >= 5 ? parity::kFlashParamFactor : 2.0;  // d routing_bias, d b_h: reductions
    const double floor = i == 1 ? parity::HalfRule{}.lse_floor : parity::kHalfRuleFloor;
    parity::expect_within_rule(flash[i], yardstick, exact[i], names[i], floor, factor);
  }
}

// docs/kernels.md: on CUDA, d b_h and the gate parameters' gradients are LibTorch reductions
// (deterministic); dq, dk, dv come from FlashAttention-2's backward, deterministic only when LibTorch's
// deterministic mode is on (it then asks the kernel for its deterministic variant).
TEST(CudaFlashAttention, ClaimedGradientsAreBitIdenticalAcrossCalls) {
  SKIP_WITHOUT_CUDA();
  for (const char* name : {"sink_logit", "combo", "combo2", "renorm"}) {
    const auto arm = parity::arm_named(name);
    const auto l = parity::as_leaves(values(300, 64, Inputs::ordinary), at::kCUDA, at::kBFloat16);
    const auto a = parity::run_arm(arm, l, AttentionBackend::flash), b = parity::run_arm(arm, l, AttentionBackend::flash);
    for (const auto& [x, y, what] : {std::tuple{a.db, b.db, "d b_h"}, std::tuple{a.dtau, b.dtau, "d tau"},
                                     std::tuple{a.dw, b.dw, "d w"}, std::tuple{a.dc, b.dc, "d c"}}) {
      if (x.defined()) EXPECT_TRUE(at::equal(x, y)) << name << " " << what;
    }
  }
  const bool was = at::globalContext().deterministicAlgorithms();
  const bool warn_only = at::globalContext().deterministicAlgorithmsWarnOnly();
  at::globalContext().setDeterministicAlgorithms(true, false);
  for (const char* name : {"baseline", "sink_logit"}) {  // no matmul outside the kernel (cuBLAS asks for an env var)
    const auto arm = parity::arm_named(name);
    const auto l = parity::as_leaves(values(300, 64, Inputs::ordinary), at::kCUDA, at::kBFloat16);
    const auto a = parity::run_arm(arm, l, AttentionBackend::flash), b = parity::run_arm(arm, l, AttentionBackend::flash);
    EXPECT_TRUE(at::equal(a.dq, b.dq) && at::equal(a.dk, b.dk) && at::equal(a.dv, b.dv))
        << name << ": dq, dk, dv differ between calls in deterministic mode";
  }
  at::globalContext().setDeterministicAlgorithms(was, warn_only);
}

// Whole model under bf16 autocast: the loss and every gradient of the flash backend within the rule
// against a float64 CPU reference, the reference backend under the same autocast being the yardstick.
TEST(CudaFlashModel, EveryArmUnderBf16AutocastWithinTheRule) {
  SKIP_WITHOUT_CUDA();
  gpu::expect_model_within_rule_under_autocast(AttentionBackend::flash);
}

}  // namespace
}  // namespace attnlab
