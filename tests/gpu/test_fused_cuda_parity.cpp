// The fused CUDA kernels against the reference (label gpu): every in-attention arm, forward
// and backward, float32 / bfloat16 / float16, head dims 64 and 128, odd lengths, T = 1, decode, sink
// logits of +-100, fully masked rows, and the whole model. Skipped, with the reason, where no CUDA
// device exists or the build has no CUDA kernels.
//
// Tolerance rule (flash-attention's): against a float64 CPU reference on the same rounded inputs, the
// fused error may be at most twice the error of the composed-op reference run on the GPU in the same
// low precision, plus a floor for when both are tiny (normalised errors, parity_helpers.h): floor
// 1e-5 for float32, 2e-3 for float16 / bfloat16 (a few ulp of bf16's 8-bit mantissa).
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <tuple>

#include "attnlab/fused_attention.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "parity/arm_runner.h"
#include "parity/parity_helpers.h"

namespace attnlab {
namespace {

#define SKIP_WITHOUT_FUSED_CUDA()                                                                        \
  do {                                                                                                  \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device (torch::cuda::is_available() is false)"; \
    if (!fused_cuda_compiled())                                                                         \
      GTEST_SKIP() << "this build has no CUDA kernels (nvcc not found at configure time, or ATTNLAB_CUDA=OFF)"; \
  } while (0)

double floor_for(at::ScalarType dtype) { return dtype == at::kFloat ? 1e-5 : 2e-3; }

std::string dtype_name(at::ScalarType t) {
  return t == at::kFloat ? "f32" : t == at::kBFloat16 ? "bf16" : "f16";
}

class CudaArmParity : public ::testing::TestWithParam<std::tuple<std::string, at::ScalarType>> {};

TEST_P(CudaArmParity, FusedWithinTwiceTheReferenceError) {
  SKIP_WITHOUT_FUSED_CUDA();
  const auto& [name, dtype] = GetParam();
  const auto arm = parity::arm_named(name);
  for (bool shared_keys : {false, true}) {  // keys sharing a large component (parity::with_shared_key_component)
    for (int64_t d : {64, 128}) {
      for (int64_t T : {1, 7, 100, 257}) {
        auto raw = parity::arm_values(77 + T, 2, 2, T, d);
        if (shared_keys) raw = parity::with_shared_key_component(raw);
        const auto values = parity::rounded(raw, dtype);
        const auto exact = parity::run_arm(arm, parity::as_leaves(values, at::kCPU, at::kDouble),
                                           AttentionBackend::reference);
        const auto low = parity::run_arm(arm, parity::as_leaves(values, at::kCUDA, dtype), AttentionBackend::reference);
        const auto fused = parity::run_arm(arm, parity::as_leaves(values, at::kCUDA, dtype), AttentionBackend::fused);
        parity::expect_run_within_rule(fused, low, exact,
                                       name + " " + dtype_name(dtype) + " d=" + std::to_string(d) + " T=" + std::to_string(T) +
                                           (shared_keys ? " shared keys" : ""),
                                       {floor_for(dtype)});
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllArms, CudaArmParity,
                         ::testing::Combine(::testing::ValuesIn(parity::in_attention_arm_names()),
                                            ::testing::Values(at::kFloat, at::kBFloat16, at::kHalf)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + dtype_name(std::get<1>(info.param));
                         });

/// One kernel-level case on CUDA; the loss includes lse, so the upstream lse gradient is checked too.
void check_kernel_case(parity::Case c, const std::string& what) {
  const auto dtype = c.dtype;
  c.dtype = at::kDouble;
  auto exact_leaves = parity::make_leaves(c);
  auto on = [&](const at::Device& device, at::ScalarType type) {
    parity::Leaves l;
    auto leaf = [&](const at::Tensor& t, at::ScalarType ty) {
      return t.defined() ? t.detach().to(device, ty).requires_grad_(true) : t;
    };
    l.q = leaf(exact_leaves.q, type), l.k = leaf(exact_leaves.k, type), l.v = leaf(exact_leaves.v, type);
    l.bias = leaf(exact_leaves.bias, at::kFloat), l.sink = leaf(exact_leaves.sink, at::kFloat);
    l.mask = exact_leaves.mask.defined() ? exact_leaves.mask.to(device) : at::Tensor();
    return l;
  };
  const auto cpu64 = on(at::kCPU, dtype);  // rounded through dtype, then compared in double
  parity::Leaves exact;
  auto back = [](const at::Tensor& t) { return t.defined() ? t.detach().to(at::kDouble).requires_grad_(true) : t; };
  exact.q = back(cpu64.q), exact.k = back(cpu64.k), exact.v = back(cpu64.v), exact.bias = back(cpu64.bias);
  exact.sink = back(cpu64.sink), exact.mask = cpu64.mask;
  const auto e = parity::run_attention(exact, false);
  const auto lo = parity::run_attention(on(at::kCUDA, dtype), false);
  const auto f = parity::run_attention(on(at::kCUDA, dtype), true);
  const double fl = floor_for(dtype);
  parity::expect_within_rule(f.o, lo.o, e.o, what + " o", fl);
  parity::expect_within_rule(f.lse, lo.lse, e.lse, what + " lse", fl);
  parity::expect_within_rule(f.dq, lo.dq, e.dq, what + " dq", fl);
  parity::expect_within_rule(f.dk, lo.dk, e.dk, what + " dk", fl);
  parity::expect_within_rule(f.dv, lo.dv, e.dv, what + " dv", fl);
  parity::expect_within_rule(f.dbias, lo.dbias, e.dbias, what + " d routing_bias", fl);
  parity::expect_within_rule(f.dsink, lo.dsink, e.dsink, what + " d b_h", fl);
}

TEST(CudaFusedAttention, SinkExtremesMaskedRowsAndDecode) {
  SKIP_WITHOUT_FUSED_CUDA();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    for (double b : {100.0, -100.0}) {
      parity::Case c;
      c.Tq = c.Tk = 65, c.d = 64, c.dtype = dtype, c.sink = true, c.sink_value = b;
      check_kernel_case(c, "b_h=" + std::to_string(b) + " " + dtype_name(dtype));
    }
    for (bool sink : {true, false}) {
      parity::Case c;
      c.Tq = c.Tk = 70, c.d = 64, c.dtype = dtype, c.sink = sink, c.mask = true, c.bias = true;
      check_kernel_case(c, std::string("masked rows, sink=") + (sink ? "yes " : "no ") + dtype_name(dtype));
    }
    for (int64_t tq : {1, 9}) {
      parity::Case c;
      c.Tq = tq, c.Tk = 130, c.d = 128, c.dtype = dtype, c.sink = true, c.bias = true;
      check_kernel_case(c, "decode Tq=" + std::to_string(tq) + " " + dtype_name(dtype));
    }
  }
}

// Whole model, float32 on the GPU: fused and reference backends give the same logits and gradients
// (1e-4 normalised: two layers of float32 attention with different summation orders).
TEST(CudaFusedModel, EveryArmMatchesReferenceBackend) {
  SKIP_WITHOUT_FUSED_CUDA();
  for (const auto& arm : all_arms()) {
    ModelConfig cfg;
    cfg.arm = arm.name, cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 128, cfg.block_size = 80, cfg.vocab_size = 64;
    GPT model(cfg);
    init_parameters(*model, 3);
    model->to(at::kCUDA);
    auto idx = at::randint(0, 64, {2, 77}, at::TensorOptions().dtype(at::kLong)).to(at::kCUDA);
    auto run = [&](AttentionBackend backend) {
      model->zero_grad();
      model->set_attention_backend(backend);
      auto logits = model->forward(idx);
      lm_loss(logits, idx).backward();
      std::vector<at::Tensor> out{logits.detach()};
      for (const auto& p : model->parameters()) out.push_back(p.grad().clone());
      return out;
    };
    const auto want = run(AttentionBackend::reference), got = run(AttentionBackend::fused);
    for (size_t i = 0; i < got.size(); ++i) parity::expect_close(got[i], want[i], 1e-4, arm.name + " #" + std::to_string(i));
  }
}

}  // namespace
}  // namespace attnlab
