// The cuDNN route's composition (cudnn_attention.h), run with a CPU stand-in for the two cuDNN calls
// (cudnn_stand_in.h: LibTorch's CPU flash kernels behind cuDNN's conventions, cuDNN's preconditions
// checked on every call). Everything but the kernel call is the code CUDA runs:
//  - float32 and float64: every in-attention arm against the composed-op reference, as tightly as the
//    flash backend's key columns (test_flash_key_columns.cpp), ordinary and extreme parameters
//    (b_h = +-100, gate logits +-200), T in {1, 2, 65, 192}, head_dim 16 and 61;
//  - every dtype: the flash backend's key-columns composition on the same kernel (which
//    test_flash_key_columns.cpp holds to the half-precision rule), bit for bit without a sink term and
//    to a few ulp with one, so the route adds nothing of its own to the arithmetic but cuDNN's
//    conventions;
//  - the routing bias and the lse gradient reach the kernel in key columns, never as a mask;
//  - the backend's name, refusals and what `auto` says about it.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "arm_runner.h"
#include "attnlab/cudnn_attention.h"
#include "attnlab/flash_attention.h"
#include "cudnn_stand_in.h"
#include "parity_helpers.h"

namespace attnlab {
namespace {

/// As test_flash_key_columns.cpp: seeded values; with extremes, sinks +100 / -100 over heads and gate
/// logits near +200 / -200.
parity::ArmLeaves values(int64_t T, int64_t d, bool extremes) {
  auto l = parity::arm_values(800 + T + d, 2, 3, T, d);
  if (extremes) {
    const auto sign = at::tensor({1.0, -1.0, 1.0}, at::kDouble);
    l.b = 100.0 * sign, l.tau = 1.0 - 25.0 * sign, l.c = 200.0 * sign;
  }
  return l;
}

parity::ArmRun run_cudnn(const ArmSpec& arm, const parity::ArmLeaves& l) {
  const parity::ArmAttend attend = [](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q,
                                      const PreparedKeys& keys) {
    return cudnn_attention(arm_attention_inputs(a, p, q, keys), parity::cudnn_cpu_stand_in());
  };
  return parity::run_arm_with(arm, l, AttentionBackend::cudnn, attend, /*lse_in_loss=*/true);
}

parity::ArmRun run_key_columns(const ArmSpec& arm, const parity::ArmLeaves& l) {
  const parity::ArmAttend attend = [](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q,
                                      const PreparedKeys& keys) {
    return flash_attention(arm_attention_inputs(a, p, q, keys), FlashComposition::key_columns);
  };
  return parity::run_arm_with(arm, l, AttentionBackend::flash, attend, /*lse_in_loss=*/true);
}

using Param = std::tuple<std::string, at::ScalarType>;

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [name, dtype] = info.param;
  return name + "_" + (dtype == at::kDouble ? "f64" : dtype == at::kFloat ? "f32" : dtype == at::kHalf ? "f16" : "bf16");
}

class CudnnComposition : public ::testing::TestWithParam<Param> {};

TEST_P(CudnnComposition, MatchesReferenceAtEveryLength) {
  const auto& [name, dtype] = GetParam();  // float32 and float64; half types: CudnnKeyColumns
  const auto arm = parity::arm_named(name);
  for (bool extremes : {false, true}) {
    // As test_flash_key_columns.cpp: float64 round-off of two summation orders; float32 the CPU
    // kernel's vectorised exp, and r_j ~ -200 rounded differently in s_ij + r_j.
    const double tol = dtype == at::kDouble ? 1e-12 : extremes ? 2e-4 : 2e-5;
    for (int64_t d : {16, 61}) {
      for (int64_t T : {1, 2, 65, 192}) {
        const auto what = name + " d=" + std::to_string(d) + " T=" + std::to_string(T) + (extremes ? " extreme" : "");
        const auto l = parity::as_leaves(values(T, d, extremes), at::kCPU, dtype);
        const auto want = parity::run_arm(arm, l, AttentionBackend::reference, /*lse_in_loss=*/true);
        parity::expect_arm_runs_close(run_cudnn(arm, l), want, tol, what);
      }
    }
  }
}

// The cuDNN route against the flash backend's key columns on the same kernel. Without a sink term
// bit for bit. With one, the sink correction's exp and logaddexp read the kernel's lse in another
// memory layout (the CPU flash kernel's [B, T, H] against cuDNN's [B, H, T, 1] made [B, H, T]), which
// LibTorch's vectorised CPU loops round differently: a few ulp of float32 (6 measured, on d b_h, a sum
// over every row), at most one ulp of a half-type output. A composition that differed in anything
// else would be far outside that.
class CudnnKeyColumns : public ::testing::TestWithParam<Param> {};

TEST_P(CudnnKeyColumns, TheFlashKeyColumnsOnTheSameKernel) {
  const auto& [name, dtype] = GetParam();
  const auto arm = parity::arm_named(name);
  const double ulps = dtype == at::kBFloat16 ? 0x1p-7 : dtype == at::kHalf ? 0x1p-10
                      : 8 * (dtype == at::kDouble ? 0x1p-52 : 0x1p-23);  // normalised: relative to max |b|
  for (bool extremes : {false, true}) {
    for (int64_t T : {17, 65}) {
      const auto l = parity::as_leaves(parity::rounded(values(T, 64, extremes), dtype), at::kCPU, dtype);
      const auto cudnn = run_cudnn(arm, l), columns = run_key_columns(arm, l);
      const auto what = name + " T=" + std::to_string(T) + (extremes ? " extreme" : "");
      for (const auto& [a, b, part] : {std::tuple{cudnn.o, columns.o, "o"}, {cudnn.lse, columns.lse, "lse"},
                                       {cudnn.dq, columns.dq, "dq"}, {cudnn.dk, columns.dk, "dk"},
                                       {cudnn.dv, columns.dv, "dv"}, {cudnn.db, columns.db, "d b_h"},
                                       {cudnn.dtau, columns.dtau, "d tau_h"}, {cudnn.dw, columns.dw, "d w_h"},
                                       {cudnn.dc, columns.dc, "d c_h"}}) {
        ASSERT_EQ(a.defined(), b.defined()) << what << " " << part;
        if (!a.defined()) continue;
        if (arm.sink == SinkKind::none) {
          EXPECT_TRUE(at::equal(a, b)) << what << " " << part;
        } else {
          EXPECT_LE(parity::normalised_error(a, b), ulps) << what << " " << part;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllArms, CudnnComposition,
                         ::testing::Combine(::testing::ValuesIn(parity::in_attention_arm_names()),
                                            ::testing::Values(at::kFloat, at::kDouble)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(AllArms, CudnnKeyColumns,
                         ::testing::Combine(::testing::ValuesIn(parity::in_attention_arm_names()),
                                            ::testing::Values(at::kFloat, at::kDouble, at::kBFloat16, at::kHalf)),
                         param_name);

// The stand-in throws on a mask (cuDNN's mask path: pytorch/pytorch#196678), on an operand width
// that is not a multiple of 8, on dO laid out unlike O and on an lse not in the forward's shape, so
// the composition above never did any of these. Here: the stand-in itself refuses them.
TEST(CudnnCompositionStandIn, RefusesWhatCudnnRefuses) {
  const auto calls = parity::cudnn_cpu_stand_in();
  const auto q = at::randn({1, 2, 5, 61});
  EXPECT_THROW(calls.forward(q, q, q, 0.125), std::logic_error);
  const auto w = at::randn({1, 2, 5, 64});
  const auto f = calls.forward(w, w, w, 0.125);
  EXPECT_EQ(f.lse.sizes(), (at::IntArrayRef{1, 2, 5, 1}));
  const auto d_o = at::randn({1, 5, 2, 64}).transpose(1, 2);  // laid out [B, T, H, w]
  EXPECT_THROW(calls.backward(d_o.contiguous(), w, w, w, d_o, f.lse, f, 0.125), std::logic_error);
  EXPECT_THROW(calls.backward(d_o, w, w, w, d_o, f.lse.squeeze(-1), f, 0.125), std::logic_error);
}

// The route hands d_o to cuDNN laid out like O even when autograd delivers another layout.
TEST(CudnnCompositionStandIn, GradientOfAnotherLayoutReachesCudnnLikeO) {
  auto q = at::randn({2, 3, 9, 64}, at::kDouble).requires_grad_(true);
  auto k = at::randn({2, 9, 3, 64}, at::kDouble).transpose(1, 2).requires_grad_(true);
  AttentionInputs in{q, k, k, {}, {}, {}};
  const auto out = cudnn_attention(in, parity::cudnn_cpu_stand_in());
  (out.o * at::randn(out.o.sizes(), at::kDouble)).sum().backward();  // a contiguous gradient
  EXPECT_TRUE(q.grad().defined() && at::isfinite(q.grad()).all().item<bool>());
}

TEST(CudnnBackend, SelectableByNameAndRefusedOffCuda) {
  EXPECT_EQ(parse_attention_backend("cudnn"), AttentionBackend::cudnn);
  EXPECT_EQ(to_string(AttentionBackend::cudnn), "cudnn");
  // The request of a call: square over 7 positions, head_dim 64, no key mask unless changed.
  const auto refusal = [](at::Device device, at::ScalarType dtype, auto&& change) {
    AttentionRequest r;
    r.device = device, r.dtype = dtype, r.q_len = r.k_len = 7;
    change(r);
    return cudnn_refusal(r);
  };
  const auto as_is = [](AttentionRequest&) {};
  const auto cuda = at::Device(at::kCUDA, 0);
  EXPECT_EQ(refusal(cuda, at::kBFloat16, [](auto& r) { r.cuda_capability = 90; }), "");
  EXPECT_EQ(refusal(cuda, at::kHalf, [](auto& r) { r.head_dim = kCudnnMaxHeadDim, r.cuda_capability = 80; }), "");
  EXPECT_NE(refusal(at::kCPU, at::kFloat, as_is).find("CUDA only"), std::string::npos);
  EXPECT_NE(refusal(cuda, at::kFloat, as_is).find("bfloat16 or float16"), std::string::npos);
  EXPECT_NE(refusal(cuda, at::kBFloat16, [](auto& r) { r.q_len = 1; }).find("Tq = Tk"), std::string::npos);
  EXPECT_NE(refusal(cuda, at::kBFloat16, [](auto& r) { r.key_mask = true; }).find("key mask"), std::string::npos);
  EXPECT_NE(refusal(cuda, at::kBFloat16, [](auto& r) { r.cuda_capability = 75; }).find("8.0"), std::string::npos);
  EXPECT_NE(refusal(cuda, at::kBFloat16, [](auto& r) { r.head_dim = kCudnnMaxHeadDim + 1; }).find("head_dim"),
            std::string::npos);
  // arm_attention names the backend and the way out.
  auto q = at::randn({1, 2, 5, 8});
  PreparedKeys keys;
  keys.k = keys.v_read = q;
  try {
    arm_attention(arm_by_name("baseline"), {}, q, keys, false, AttentionBackend::cudnn);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("attention backend 'cudnn': cuDNN attention runs on CUDA only"),
              std::string::npos)
        << e.what();
  }
}

// `auto` keeps FlashAttention-2 until a GPU run records cuDNN faster and correct, and says so.
TEST(CudnnBackend, AutoKeepsFlashWhileCudnnIsNotMeasured) {
  for (int capability : {80, 90, 100}) {
    const auto record = cudnn_record(capability);
    EXPECT_FALSE(record.faster_and_correct) << capability;
    EXPECT_NE(record.why.find("cuDNN not measured on compute capability " + std::to_string(capability / 10) + "." +
                              std::to_string(capability % 10)),
              std::string::npos)
        << record.why;
  }
}

}  // namespace
}  // namespace attnlab
