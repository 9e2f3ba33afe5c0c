// The sixth-backend test (docs/kernels.md, "Selecting a backend"): a throwaway backend that no row of
// src/attention/backend_table.cpp holds becomes one row, registered when ATTNLAB_TEST_EXTRA_BACKEND is
// set (ctest -R sixth_backend), and is then named, chosen by `auto`, refused, run and checked by a
// config through the table, as the built-in five are. Without the variable every case skips.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "attnlab/arm_attention.h"
#include "attnlab/backend_table.h"
#include "attnlab/run_config.h"
#include "parity_helpers.h"

namespace attnlab {
namespace {

constexpr auto kSixth = static_cast<AttentionBackend>(100);  // a value no built-in row has
int sixth_calls = 0;

// It serves float64 without probabilities, and computes the reference's math.
std::string sixth_refusal(const AttentionRequest& r, const ArmSpec&) {
  if (r.return_probs) return "it never forms the T x T probabilities";
  if (r.dtype != at::kDouble) return std::string("the test-only backend takes float64 only, got ") + c10::toString(r.dtype);
  return "";
}

AttentionResult sixth_run(const AttentionInputs& in, bool) {
  ++sixth_calls;
  return reference_attention(in);
}

// At static initialisation, before anything names a backend (the name table is built from the rows).
bool register_sixth() {
  const char* on = std::getenv("ATTNLAB_TEST_EXTRA_BACKEND");
  if (!on || !*on) return false;
  register_backend({kSixth, "sixth", sixth_refusal, sixth_run}, {at::kCPU});
  return true;
}
const bool kSixthRegistered = register_sixth();

class ExtraBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kSixthRegistered) GTEST_SKIP() << "set ATTNLAB_TEST_EXTRA_BACKEND (ctest -R sixth_backend)";
  }
};

AttentionRequest cpu_call(at::ScalarType dtype, bool probs = false) {
  AttentionRequest r;
  r.dtype = dtype, r.q_len = r.k_len = 7, r.return_probs = probs;
  return r;
}

parity::Leaves leaves(at::ScalarType dtype) {
  parity::Case c;
  c.dtype = dtype;
  return parity::make_leaves(c);
}

TEST_F(ExtraBackend, IsNamedAfterItsRow) {
  EXPECT_EQ(parse_attention_backend("sixth"), kSixth);
  EXPECT_EQ(to_string(kSixth), "sixth");
  EXPECT_EQ(name_table<AttentionBackend>().valid_names(), "auto, fused, reference, sdpa, flash, cudnn, sixth");
}

TEST_F(ExtraBackend, AutoTakesItFirstOnCpuWhereItsRefusalIsEmpty) {
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, cpu_call(at::kDouble)), kSixth);
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, cpu_call(at::kFloat)), AttentionBackend::flash);
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, cpu_call(at::kDouble, true)), AttentionBackend::reference);
  AttentionRequest cuda = cpu_call(at::kDouble);
  cuda.device = at::Device(at::kCUDA, 0);
  EXPECT_EQ(resolve_backend(AttentionBackend::automatic, cuda), AttentionBackend::reference) << "not first on CUDA";
}

TEST_F(ExtraBackend, ArmAttentionRunsItsRow) {
  const auto l = leaves(at::kDouble);
  const auto& arm = arm_by_name("baseline");
  const PreparedKeys keys{l.k, l.v, {}, {}, {}};
  const int before = sixth_calls;
  const auto got = arm_attention(arm, {}, l.q, keys, false, kSixth);
  const auto chosen = arm_attention(arm, {}, l.q, keys, false, AttentionBackend::automatic);
  const auto want = arm_attention(arm, {}, l.q, keys, false, AttentionBackend::reference);
  EXPECT_EQ(sixth_calls, before + 2);
  EXPECT_TRUE(got.o.equal(want.o) && got.lse.equal(want.lse));
  EXPECT_TRUE(chosen.o.equal(want.o));
}

TEST_F(ExtraBackend, ItsRefusalNamesWhyAndTheBackendsThatServe) {
  const auto l = leaves(at::kFloat);
  try {
    arm_attention(arm_by_name("baseline"), {}, l.q, {l.k, l.v, {}, {}, {}}, false, kSixth);
    FAIL() << "no refusal";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "attention backend 'sixth': the test-only backend takes float64 only, got Float; "
                                     "use 'auto', 'fused', 'reference', 'sdpa' or 'flash'");
  }
  const auto serving = serving_backends({cpu_call(at::kDouble)}, arm_by_name("baseline"));
  EXPECT_EQ(backend_list(serving), "'auto', 'fused', 'reference', 'sdpa', 'flash' or 'sixth'");
}

TEST_F(ExtraBackend, AConfigAsksTheSameRefusal) {
  RunConfig c;
  c.attention.backend = kSixth;
  c.train.device = DeviceChoice::cpu;
  try {
    validate(c);
    FAIL() << "no refusal";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("attention.backend: sixth cannot run on cpu in Float (train.device: cpu, train.precision: "
                        "bf16): the test-only backend takes float64 only, got Float; use auto, ",
                        0),
              0u)
        << msg;
  }
}

}  // namespace
}  // namespace attnlab
