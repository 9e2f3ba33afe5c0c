// The first-use self-check (attention_self_check.h) on the CPU: the real backends pass, on every arm;
// deliberately wrong backends (a planted fault in dq on the shared-large-key rows, in dk, in o, a NaN)
// are caught, with an error that names the backend, the arm, the dtype, the worst tensor and the
// setting that avoids it; and its fourth yardstick, a flash kernel's own arithmetic, is what a correct
// kernel reaches on the shared-large-key rows.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "arm_runner.h"
#include "attnlab/arm_call.h"
#include "attnlab/attention_self_check.h"
#include "attnlab/cudnn_attention.h"
#include "attnlab/flash_attention.h"
#include "cudnn_stand_in.h"

namespace attnlab {
namespace {

SelfCheckCase cpu_case(const std::string& arm, AttentionBackend backend, at::ScalarType dtype = at::kFloat) {
  SelfCheckCase c;
  c.arm = parity::arm_named(arm), c.backend = backend, c.dtype = dtype, c.head_dim = 64;
  return c;
}

/// The flash backend with `fault` applied to the gradient reaching q (or k) and to o.
struct Fault {
  double dq_scale_shared_rows = 1.0;  ///< dq of sequence 1, head 0 (the shared-large-key rows) times this
  double dk_offset = 0.0;             ///< added to dk at one element
  double o_offset = 0.0;              ///< added to o at one element
  bool nan_in_dk = false;
};

ArmAttend faulty_flash(Fault fault) {
  return [fault](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q, const PreparedKeys& keys) {
    auto in = arm_attention_inputs(a, p, q, keys);
    in.q = q.view_as(q);
    in.q.register_hook([fault](at::Tensor g) {
      g = g.clone();
      g[1][0].mul_(fault.dq_scale_shared_rows);
      return g;
    });
    in.k = keys.k.view_as(keys.k);
    in.k.register_hook([fault](at::Tensor g) {
      g = g.clone();
      g[0][1][3][5].add_(fault.nan_in_dk ? std::nan("") : fault.dk_offset);
      return g;
    });
    auto out = flash_attention(in);
    if (fault.o_offset != 0.0) {
      auto bump = at::zeros_like(out.o);
      bump[0][0][7][2] = fault.o_offset;
      out.o = out.o + bump;
    }
    return out;
  };
}

/// The failure the planted fault must cause: its message and result (empty when it passed).
struct Caught {
  std::string what;
  SelfCheckResult result;
};

Caught expect_caught(const SelfCheckCase& c, const ArmAttend& attend, const std::string& tensor) {
  try {
    check_attention_backend(c, attend, AttentionBackend::flash, "flash (planted fault)");
  } catch (const AttentionSelfCheckError& e) {
    EXPECT_EQ(e.result().worst().tensor, tensor) << e.what();
    EXPECT_FALSE(e.result().passed());
    return {e.what(), e.result()};
  }
  ADD_FAILURE() << "the planted fault in " << tensor << " passed the self-check";
  return {};
}

class SelfCheckRealBackends : public ::testing::TestWithParam<std::string> {};

// float32 on the CPU (what a CPU run computes in): every backend that serves the arm passes.
TEST_P(SelfCheckRealBackends, PassOnTheCpu) {
  const auto& name = GetParam();
  for (auto backend : {AttentionBackend::automatic, AttentionBackend::flash, AttentionBackend::fused,
                       AttentionBackend::reference}) {
    const auto r = check_attention_backend(cpu_case(name, backend));
    EXPECT_TRUE(r.passed());
    EXPECT_EQ(r.backend, to_string(backend == AttentionBackend::automatic ? AttentionBackend::flash : backend));
    EXPECT_GE(r.checks.size(), 5u) << "o, lse, dq, dk, dv at least";
    for (const auto& c : r.checks) {
      EXPECT_TRUE(std::isfinite(c.error)) << name << " " << r.backend << " " << c.tensor;
      if (c.tensor == "dq") EXPECT_GT(c.error, 0.0) << name << " " << r.backend << ": float32 is not float64";
    }
  }
  // sdpa, for the arms it computes: it returns no lse, so lse is not held to the rule.
  if (backend_refusal(AttentionBackend::sdpa, AttentionRequest{}, parity::arm_named(name)).empty()) {
    const auto r = check_attention_backend(cpu_case(name, AttentionBackend::sdpa));
    EXPECT_TRUE(r.passed());
    for (const auto& c : r.checks) EXPECT_NE(c.tensor, "lse");
    EXPECT_GE(r.checks.size(), 4u) << "o, dq, dk, dv";
  }
  // The cuDNN route's composition with the CPU stand-in for its two calls.
  const ArmAttend cudnn = [](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q, const PreparedKeys& keys) {
    return cudnn_attention(arm_attention_inputs(a, p, q, keys), parity::cudnn_cpu_stand_in());
  };
  EXPECT_TRUE(check_attention_backend(cpu_case(name, AttentionBackend::cudnn), cudnn, AttentionBackend::cudnn,
                                      "cudnn (CPU stand-in)")
                  .passed());
}

// The reference backend in bfloat16 and float16 holds to its own rule (it is the yardstick).
TEST_P(SelfCheckRealBackends, ReferencePassesInHalfTypes) {
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    EXPECT_TRUE(check_attention_backend(cpu_case(GetParam(), AttentionBackend::reference, dtype)).passed());
  }
}

INSTANTIATE_TEST_SUITE_P(AllArms, SelfCheckRealBackends, ::testing::ValuesIn(parity::in_attention_arm_names()));

// cudnn-frontend#744's signature: dq and dk off by some percent, along the shared key direction, on
// the rows whose scores are deeply negative. A 7% error of dq on those rows alone is caught.
TEST(SelfCheckPlantedFaults, DqOffOnTheSharedKeyRowsIsCaught) {
  for (const char* arm : {"baseline", "sink_logit", "renorm"}) {
    Fault fault;
    fault.dq_scale_shared_rows = 1.07;
    expect_caught(cpu_case(arm, AttentionBackend::flash), faulty_flash(fault), "dq");
  }
}

TEST(SelfCheckPlantedFaults, DkOffAtOneKeyIsCaught) {
  Fault fault;
  fault.dk_offset = 0.05;
  expect_caught(cpu_case("combo", AttentionBackend::flash), faulty_flash(fault), "dk");
}

TEST(SelfCheckPlantedFaults, OOffAtOneQueryIsCaught) {
  Fault fault;
  fault.o_offset = 0.01;
  expect_caught(cpu_case("norm_gate", AttentionBackend::flash), faulty_flash(fault), "o");
}

// A NaN never passes (cudnn-frontend#1072: NaN dK / dV on H200 for negative LSE).
TEST(SelfCheckPlantedFaults, NanIsCaught) {
  Fault fault;
  fault.nan_in_dk = true;
  const auto e = expect_caught(cpu_case("baseline", AttentionBackend::flash), faulty_flash(fault), "dk");
  ASSERT_FALSE(e.result.checks.empty());
  EXPECT_TRUE(std::isnan(e.result.worst().error));
  EXPECT_TRUE(to_json(e.result)["tensors"]["dk"]["error"].is_null());
}

// The error says what failed and how to avoid it.
TEST(SelfCheckPlantedFaults, ErrorNamesBackendArmDtypeWorstTensorAndTheWayOut) {
  Fault fault;
  fault.dq_scale_shared_rows = 1.07;
  const auto e = expect_caught(cpu_case("sink_logit", AttentionBackend::flash), faulty_flash(fault), "dq");
  const std::string& what = e.what;
  for (const char* part : {"backend flash (planted fault)", "arm sink_logit", "dtype Float", "head_dim 64",
                           "dq is off by", "attention.backend: reference"}) {
    EXPECT_NE(what.find(part), std::string::npos) << part << " missing from: " << what;
  }
}

// The fourth yardstick, a flash kernel's own arithmetic (arm_call.h): D_i from the rounded o, times the
// keys' shared component, lands in dq, so on the shared-large-key rows a correct kernel is further from
// float64 than the composed-op yardsticks are. Without it the rule would refuse that arithmetic
// itself; with it, LibTorch's CPU flash kernel (the same arithmetic, through the key-columns
// composition CUDA runs) stays within the rule, and the planted faults above are still caught.
TEST(SelfCheckYardstick, FlashArithmeticCarriesTheSharedKeyAmplification) {
  const auto arm = parity::arm_named("baseline");
  const auto src = rounded(self_check_values(64, 1), at::kBFloat16);
  auto on = [&](at::ScalarType t) { return as_leaves(src, at::kCPU, t); };
  const auto exact = run_arm(arm, on(at::kDouble), AttentionBackend::reference, true);
  const auto low = run_arm(arm, on(at::kBFloat16), AttentionBackend::reference, true);
  const auto rounding_p = run_arm_rounding_p(arm, on(at::kBFloat16));
  const auto arithmetic = run_arm_flash_arithmetic(arm, on(at::kBFloat16));
  const parity::ArmAttend columns = [](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q,
                                       const PreparedKeys& keys) {
    return flash_attention(arm_attention_inputs(a, p, q, keys), FlashComposition::key_columns);
  };
  const auto kernel = run_arm_with(arm, on(at::kBFloat16), AttentionBackend::flash, columns, true);
  const double composed = std::max(normalised_error(low.dq, exact.dq), normalised_error(rounding_p.dq, exact.dq));
  const double own = normalised_error(arithmetic.dq, exact.dq);
  EXPECT_GT(own, 2 * composed) << "the arithmetic's dq error, " << own << ", against the composed ops' " << composed;
  EXPECT_LT(normalised_error(kernel.dq, exact.dq), 2 * own + kHalfRuleFloor);
  // Where no key component is shared (sequence 0), the arithmetic is as close as the composed ops.
  auto first = [](const at::Tensor& t) { return t.select(0, 0); };
  EXPECT_LT(normalised_error(first(arithmetic.dq), first(exact.dq)),
            2 * normalised_error(first(low.dq), first(exact.dq)) + kHalfRuleFloor);
}

TEST(SelfCheck, ResultAsJson) {
  const auto r = check_attention_backend(cpu_case("combo2", AttentionBackend::flash));
  const auto j = to_json(r);
  EXPECT_EQ(j["backend"], "flash");
  EXPECT_EQ(j["arm"], "combo2");
  EXPECT_EQ(j["dtype"], "Float");
  EXPECT_EQ(j["head_dim"], 64);
  EXPECT_EQ(j["shape"], nlohmann::json::array({kSelfCheckBatch, kSelfCheckHeads, kSelfCheckLength}));
  EXPECT_TRUE(j["passed"].get<bool>());
  EXPECT_EQ(j["tensors"].size(), r.checks.size());
  for (const auto& c : r.checks) {
    EXPECT_DOUBLE_EQ(j["tensors"][c.tensor]["error"].get<double>(), c.error) << c.tensor;
    EXPECT_DOUBLE_EQ(j["tensors"][c.tensor]["bound"].get<double>(), c.bound) << c.tensor;
  }
  // combo2: sink and projection gate, so the phantom mass and d b_h, d w_h, d c_h are held too.
  for (const char* t : {"o", "lse", "phantom mass", "dq", "dk", "dv", "d b_h", "d w_h", "d c_h"}) {
    EXPECT_TRUE(j["tensors"].contains(t)) << t;
  }
  EXPECT_GT(j["ms"].get<double>(), 0.0);
}

// The case holds the input class it names: on sequence 1, head 0 every key shares one large
// component and alternate queries score near -110 (lse below -ln(FLT_MAX)) and +110.
TEST(SelfCheck, CaseHoldsTheSharedLargeKeyComponentRows) {
  const auto l = self_check_values(64, 1);
  const auto s = at::matmul(l.q[1][0], l.k[1][0].transpose(0, 1)) / 8.0;  // scale 1/sqrt(64)
  const auto causal = at::ones({kSelfCheckLength, kSelfCheckLength}, at::kBool).tril();
  const auto lse = at::logsumexp(s.masked_fill(causal.logical_not(), -INFINITY), -1);
  EXPECT_LT(lse.slice(0, 0, kSelfCheckLength, 2).max().item<double>(), -88.7);
  EXPECT_GT(lse.slice(0, 1, kSelfCheckLength, 2).min().item<double>(), 88.7);
  const auto plain = at::matmul(l.q[0][0], l.k[0][0].transpose(0, 1)) / 8.0;
  EXPECT_LT(plain.abs().max().item<double>(), 10.0);
}

}  // namespace
}  // namespace attnlab
