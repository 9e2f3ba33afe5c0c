// The first-use self-check of an attention backend (docs/kernels.md, "The first-use self-check"):
// before a run trusts a backend's kernels on its device, run its forward and backward once on a small
// seeded case of the run's own arm, dtype and head_dim, and hold every output and gradient to the
// project's half-precision rule (half_precision_rule.h) against a float64 run on the same rounded
// inputs. Outside the rule it stops the run, never falling back silently; within it, the measured
// errors are the evidence a run records that its kernels were right.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnlab/arm.h"
#include "attnlab/arm_attention.h"
#include "attnlab/arm_call.h"
#include "attnlab/half_precision_rule.h"
#include "attnlab/self_check_record.h"

namespace attnlab {

/// What to check: the backend as the run names it (`automatic` is resolved for the case, as a
/// training call of this dtype would resolve it), the arm, the device, the dtype of q, k, v as the
/// kernels see them (bfloat16 for a bf16-autocast CUDA run, float32 on the CPU) and the head_dim.
struct SelfCheckCase {
  ArmSpec arm;
  AttentionBackend backend = AttentionBackend::automatic;
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  int64_t head_dim = 64;
  uint64_t seed = 1;
};

/// The case's tensors: B = 2 sequences of T = 192 positions (T = 64 mod 128: the KV-tail length of
/// cuDNN's SM90 backward bug, pytorch/pytorch#196678), H = 2 heads. Sequence 0 and head 1 of sequence
/// 1 are N(0, 1); head 0 of sequence 1 is the shared-large-key-component row: every key is
/// n_j + 2 sqrt(d) u for one unit vector u, and the queries n_i -+ 80 u alternate, so their scores
/// sit near -160 and +160 (lse below -ln(FLT_MAX) = -88.7 on every other row, the input class of
/// cudnn-frontend#744 and of LibTorch's CPU flash bfloat16 dq error).
inline constexpr int64_t kSelfCheckBatch = 2, kSelfCheckHeads = 2, kSelfCheckLength = 192;

/// Seeded float64 CPU values of the case (ArmLeaves: q, k, v [2, 2, 192, head_dim] and the arm
/// parameters: b_h ~ N(0, 1), tau_h ~ N(1, 0.2) so norm gates spread over (0, 1), w ~ N(0, 0.3),
/// c ~ N(0, 1)).
ArmLeaves self_check_values(int64_t head_dim, uint64_t seed);

/// The failure: what() names the backend, arm, dtype, the worst tensor with its error and bound, and
/// the setting that avoids the kernels (`attention.backend: reference`); result() has every error.
class AttentionSelfCheckError : public std::runtime_error {
 public:
  explicit AttentionSelfCheckError(SelfCheckResult result);
  const SelfCheckResult& result() const { return result_; }

 private:
  SelfCheckResult result_;
};

/// Runs the case on the backend (or on `attend` when given, named `name` in the result and the error:
/// a composition under test, a stand-in, a planted fault; `gate_backend` then decides the gate) and on
/// four yardstick runs: the reference backend in float64 on the CPU (exact), the reference backend in
/// the case's dtype on its device (low), run_arm_rounding_p and run_arm_flash_arithmetic on the
/// device. Every output and gradient is held to check_run_within_rule(got, low, exact, {rounding_p,
/// flash arithmetic}, rule_for_dtype(dtype)): a kernel may be as far from float64 as twice what a
/// flash kernel's own arithmetic is, and no further (D_i from the rounded o, times a shared key
/// component, is a correct kernel's dq error on the shared-large-key rows: docs/kernels.md).
/// sdpa returns no lse: then no run's loss reads lse and lse is not checked.
/// Returns the result when every tensor is within the rule. Throws AttentionSelfCheckError when one
/// is not (a NaN included), std::invalid_argument when the backend cannot serve the case (the
/// backend's own refusal, e.g. flash for float32 on CUDA), and whatever the kernels throw.
/// Cost: milliseconds, once per (backend, arm, dtype, head_dim) and process (docs/benchmarks.md).
SelfCheckResult check_attention_backend(const SelfCheckCase& c);
SelfCheckResult check_attention_backend(const SelfCheckCase& c, const ArmAttend& attend,
                                        AttentionBackend gate_backend = AttentionBackend::reference,
                                        const std::string& name = "custom");

/// The check a run or an analysis makes before it first uses its attention on a device (the trainer
/// before its first step, open_trained() before an analysis; docs/kernels.md, "The first-use
/// self-check"): check_attention_backend(c), or `runner` when given, logged at info level with its
/// worst tensor and milliseconds. A case that passed the real check is remembered, so that each
/// (backend, arm, device, dtype, head_dim, seed) is checked once per process (a sweep's in-process
/// runs share it); a runner's results are not. Throws what the check throws.
SelfCheckResult first_use_self_check(const SelfCheckCase& c, const SelfCheckRunner& runner = {});

}  // namespace attnlab
