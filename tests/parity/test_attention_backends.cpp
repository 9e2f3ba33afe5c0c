// The backend switch of arm_attention (issue 5): names, what `auto` picks, what each backend refuses,
// and sdpa against the reference on the baseline arm.
#include <gtest/gtest.h>

#include "attnlab/arm_attention.h"
#include "attnlab/sdpa_attention.h"
#include "parity_helpers.h"

namespace attnlab {
namespace {

TEST(AttentionBackends, NamesRoundTrip) {
  for (auto b : {AttentionBackend::automatic, AttentionBackend::fused, AttentionBackend::reference,
                 AttentionBackend::sdpa}) {
    EXPECT_EQ(parse_attention_backend(to_string(b)), b);
  }
  try {
    parse_attention_backend("flash");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'flash'"), std::string::npos) << e.what();
  }
}

TEST(AttentionBackends, AutoUsesFusedOnCpuAndReferenceForProbabilities) {
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, at::kCPU), AttentionBackend::fused);
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, at::kCPU, /*return_probs=*/true),
            AttentionBackend::reference);
  EXPECT_EQ(resolve_backend(AttentionBackend::sdpa, at::kCPU), AttentionBackend::sdpa);
}

TEST(AttentionBackends, AutoUsesReferenceOnCudaUntilGpuParityIsRecorded) {
  // Issue 5: fused CUDA only after a recorded GPU parity run (docs/benchmarks.md).
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, at::Device(at::kCUDA, 0)), AttentionBackend::reference);
}

parity::Leaves small_leaves(at::ScalarType dtype, int64_t tq = 9) {
  parity::Case c;
  c.Tq = tq, c.Tk = 9, c.dtype = dtype;
  return parity::make_leaves(c);
}

TEST(AttentionBackends, FusedRefusesToMaterialiseProbabilities) {
  const auto l = small_leaves(at::kFloat);
  const auto& arm = arm_by_name("baseline");
  const auto keys = prepare_keys(arm, {}, l.k, l.v);
  EXPECT_THROW(arm_attention(arm, {}, l.q, keys, /*return_probs=*/true, AttentionBackend::fused),
               std::invalid_argument);
  const auto out = arm_attention(arm, {}, l.q, keys, true, AttentionBackend::automatic);
  EXPECT_TRUE(out.probs.defined());  // auto falls back to the reference for probabilities
}

TEST(AttentionBackends, SdpaRefusesArmsWithASinkOrGateNamingTheArm) {
  const auto l = small_leaves(at::kFloat);
  for (const char* name : {"sink_logit", "off_by_one", "norm_gate", "renorm", "combo2"}) {
    const auto& arm = arm_by_name(name);
    ArmLayerParams params;
    params.sink_logit = at::zeros({3});
    try {
      arm_attention(arm, params, l.q, {l.k, l.v, {}, {}, {}}, false, AttentionBackend::sdpa);
      ADD_FAILURE() << name << ": no exception";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

// SDPA computes the same plain causal softmax; float64 runs SDPA's math path, so 1e-12 (round-off);
// float32 may take its flash path: 1e-5. Decode (Tq < Tk) uses the bottom-right mask.
TEST(AttentionBackends, SdpaMatchesReferenceOnBaseline) {
  for (auto dtype : {at::kFloat, at::kDouble}) {
    for (int64_t tq : {9, 3, 1}) {
      const auto l = small_leaves(dtype, tq);
      const auto& arm = arm_by_name("baseline");
      const auto keys = prepare_keys(arm, {}, l.k, l.v);
      const auto want = arm_attention(arm, {}, l.q, keys, false, AttentionBackend::reference);
      const auto got = arm_attention(arm, {}, l.q, keys, false, AttentionBackend::sdpa);
      parity::expect_close(got.o, want.o, dtype == at::kDouble ? 1e-12 : 1e-5, "sdpa Tq=" + std::to_string(tq));
      EXPECT_FALSE(got.lse.defined());
    }
  }
}

}  // namespace
}  // namespace attnlab
