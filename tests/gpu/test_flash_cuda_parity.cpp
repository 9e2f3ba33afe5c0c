// The flash backend on CUDA (FlashAttention-2 through at::_scaled_dot_product_flash_attention, label
// gpu): every in-attention arm in bfloat16 and float16, head dims 64 and 128, T in {1, 2, 63, 64,
// 65, 257}, ordinary and extreme parameters (b_h = +-100, gate logits +-200), o, lse, phantom mass
// and every gradient of a loss reading o and lse; determinism of the reductions the backend claims; the whole model under bf16 autocast.
// Skipped, with the reason, where no CUDA device exists.
//
// Tolerance rule (flash-attention's): against a float64 CPU reference on the same rounded inputs, the
// flash error may be at most twice the error of the composed-op reference run on the GPU in the same
// low precision, plus a floor for when both are tiny (normalised errors, parity_helpers.h): 2e-3 for
// float16 / bfloat16 (a few ulp of bf16's 8-bit mantissa).
#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <torch/cuda.h>

#include <tuple>

#include "attnlab/device.h"
#include "attnlab/flash_attention.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "parity/arm_runner.h"
#include "parity/parity_helpers.h"

namespace attnlab {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device (torch::cuda::is_available() is false)"

constexpr double kFloor = 2e-3;

std::string dtype_name(at::ScalarType t) { return t == at::kBFloat16 ? "bf16" : "f16"; }

/// `t` rounded to the precision the GPU side sees (inputs in dtype, parameters in float32).
at::Tensor rounded(const at::Tensor& t, at::ScalarType type) { return t.to(type).to(at::kDouble); }

parity::ArmLeaves rounded(const parity::ArmLeaves& s, at::ScalarType dtype) {
  return {rounded(s.q, dtype), rounded(s.k, dtype), rounded(s.v, dtype), rounded(s.b, at::kFloat),
          rounded(s.tau, at::kFloat), rounded(s.w, at::kFloat), rounded(s.c, at::kFloat)};
}

/// Seeded values; `extreme`: sinks +100 / -100 over heads, gate logits near +200 / -200.
parity::ArmLeaves values(int64_t T, int64_t d, bool extreme) {
  auto l = parity::arm_values(900 + T + d, 2, 2, T, d);
  if (extreme) {
    const auto sign = at::tensor({1.0, -1.0}, at::kDouble);
    l.b = 100.0 * sign, l.tau = 1.0 - 25.0 * sign, l.c = 200.0 * sign;
  }
  return l;
}

void expect_within_rule(const at::Tensor& flash, const at::Tensor& low, const at::Tensor& exact,
                        const std::string& what) {
  ASSERT_EQ(flash.defined(), exact.defined()) << what;
  if (!exact.defined()) return;
  const double err = parity::normalised_error(flash, exact), ref_err = parity::normalised_error(low, exact);
  EXPECT_LE(err, 2 * ref_err + kFloor) << what << ": flash error " << err << ", reference error " << ref_err;
}

void expect_run_within_rule(const parity::ArmRun& f, const parity::ArmRun& l, const parity::ArmRun& e,
                            const std::string& what) {
  expect_within_rule(f.o, l.o, e.o, what + " o");
  expect_within_rule(f.lse, l.lse, e.lse, what + " lse");
  expect_within_rule(f.phantom, l.phantom, e.phantom, what + " phantom mass");
  expect_within_rule(f.dq, l.dq, e.dq, what + " dq");
  expect_within_rule(f.dk, l.dk, e.dk, what + " dk");
  expect_within_rule(f.dv, l.dv, e.dv, what + " dv");
  expect_within_rule(f.db, l.db, e.db, what + " d b_h");
  expect_within_rule(f.dtau, l.dtau, e.dtau, what + " d tau");
  expect_within_rule(f.dw, l.dw, e.dw, what + " d w");
  expect_within_rule(f.dc, l.dc, e.dc, what + " d c");
}

class CudaFlashArmParity : public ::testing::TestWithParam<std::tuple<std::string, at::ScalarType>> {};

TEST_P(CudaFlashArmParity, FlashWithinTwiceTheReferenceError) {
  SKIP_WITHOUT_CUDA();
  const auto& [name, dtype] = GetParam();
  const auto arm = parity::arm_named(name);
  for (bool extreme : {false, true}) {
    for (int64_t d : {64, 128}) {
      for (int64_t T : {1, 2, 63, 64, 65, 257}) {
        const auto v = rounded(values(T, d, extreme), dtype);
        // The loss reads lse too, so the lse-gradient path runs (phantom-mass probes differentiate it).
        const auto exact =
            parity::run_arm(arm, parity::as_leaves(v, at::kCPU, at::kDouble), AttentionBackend::reference, true);
        const auto low = parity::run_arm(arm, parity::as_leaves(v, at::kCUDA, dtype), AttentionBackend::reference, true);
        const auto flash = parity::run_arm(arm, parity::as_leaves(v, at::kCUDA, dtype), AttentionBackend::flash, true);
        expect_run_within_rule(flash, low, exact,
                               name + " " + dtype_name(dtype) + " d=" + std::to_string(d) + " T=" + std::to_string(T) +
                                   (extreme ? " extreme" : ""));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllArms, CudaFlashArmParity,
                         ::testing::Combine(::testing::ValuesIn(parity::in_attention_arm_names()),
                                            ::testing::Values(at::kBFloat16, at::kHalf)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + dtype_name(std::get<1>(info.param));
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
  auto run = [](const parity::Leaves& l, AttentionBackend backend) {
    AttentionInputs in{l.q, l.k, l.v, l.bias, l.sink, {}};
    auto out = backend == AttentionBackend::flash ? flash_attention(in) : reference_attention(in);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    const auto R = at::normal(0.0, 1.0, out.o.sizes(), gen, f64).to(out.o.options());
    const auto S = at::normal(0.0, 1.0, out.lse.sizes(), gen, f64).to(out.lse.options());
    ((out.o * R).sum() + (out.lse * S).sum()).backward();
    return std::vector<at::Tensor>{out.o.detach(), out.lse.detach(), l.q.grad(), l.k.grad(),
                                   l.v.grad(),     l.bias.grad(),    l.sink.grad()};
  };
  const auto exact = run(on(at::kCPU, at::kDouble), AttentionBackend::reference);
  const auto low = run(on(at::kCUDA, at::kBFloat16), AttentionBackend::reference);
  const auto flash = run(on(at::kCUDA, at::kBFloat16), AttentionBackend::flash);
  const char* names[] = {"o", "lse", "dq", "dk", "dv", "d routing_bias", "d b_h"};
  for (size_t i = 0; i < exact.size(); ++i) expect_within_rule(flash[i], low[i], exact[i], names[i]);
}

// docs/kernels.md: on CUDA, d b_h and the gate parameters' gradients are LibTorch reductions
// (deterministic); dq, dk, dv come from FlashAttention-2's backward, deterministic only when LibTorch's
// deterministic mode is on (it then asks the kernel for its deterministic variant).
TEST(CudaFlashAttention, ClaimedGradientsAreBitIdenticalAcrossCalls) {
  SKIP_WITHOUT_CUDA();
  for (const char* name : {"sink_logit", "combo", "combo2", "renorm"}) {
    const auto arm = parity::arm_named(name);
    const auto l = parity::as_leaves(values(300, 64, false), at::kCUDA, at::kBFloat16);
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
    const auto l = parity::as_leaves(values(300, 64, false), at::kCUDA, at::kBFloat16);
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
  for (const auto& arm : all_arms()) {
    ModelConfig cfg;
    cfg.arm = arm.name, cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 128, cfg.block_size = 80, cfg.vocab_size = 64;
    GPT model(cfg);
    init_parameters(*model, 3);
    auto idx = at::randint(0, 64, {2, 77}, at::TensorOptions().dtype(at::kLong));
    auto run = [&](const at::Device& device, at::ScalarType dtype, AttentionBackend backend) {
      model->to(device, dtype);
      model->zero_grad();
      model->set_attention_backend(backend);
      at::Tensor loss;
      {
        AutocastGuard autocast(device, device.is_cuda());
        loss = lm_loss(model->forward(idx.to(device)), idx.to(device));
      }
      loss.backward();
      std::vector<at::Tensor> out{loss.detach().to(at::kCPU, at::kDouble)};
      for (const auto& p : model->parameters()) out.push_back(p.grad().to(at::kCPU, at::kDouble));
      return out;
    };
    const auto exact = run(at::kCPU, at::kDouble, AttentionBackend::reference);
    const auto low = run(at::kCUDA, at::kFloat, AttentionBackend::reference);
    const auto flash = run(at::kCUDA, at::kFloat, AttentionBackend::flash);
    const auto names = model->named_parameters().keys();
    for (size_t i = 0; i < exact.size(); ++i) {
      expect_within_rule(flash[i], low[i], exact[i], arm.name + " " + (i == 0 ? "loss" : "grad " + names[i - 1]));
    }
  }
}

}  // namespace
}  // namespace attnlab
