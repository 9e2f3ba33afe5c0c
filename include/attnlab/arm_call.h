// One arm's attention call, forward and backward, on any backend, device and dtype, with every
// output and gradient of a loss that reads o and lse: what the parity suites, the GPU suite and the
// first-use self-check (attention_self_check.h) all run and compare (docs/kernels.md, "Precision in
// bfloat16 / float16").
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

#include "attnlab/arm.h"
#include "attnlab/arm_attention.h"
#include "attnlab/attention.h"

namespace attnlab {

/// Inputs of one arm call: q, k, v [B, H, T, d] and every arm parameter (each arm uses its own):
/// b [H] (sink logit b_h), tau [H] (norm gate), w [H, d] and c [H] (projection gate).
struct ArmLeaves {
  at::Tensor q, k, v, b, tau, w, c;
};

/// Fresh leaves (requires_grad) on `device`: q, k, v in `dtype`, the parameters in its accumulator
/// dtype (float32 for half types and float32, float64 for float64).
ArmLeaves as_leaves(const ArmLeaves& src, const at::Device& device, at::ScalarType dtype);

/// `src` rounded to what a run in `dtype` sees, held in float64 on the CPU: q, k, v through `dtype`,
/// the parameters through float32. An exact (float64) run on these is the yardstick's reference.
ArmLeaves rounded(const ArmLeaves& src, at::ScalarType dtype);

/// Outputs and gradients of loss = sum(o * R) [+ sum(lse * S)] with R, S ~ N(0, 1) drawn from fixed
/// CPU seeds; every tensor float64 on the CPU, undefined where the arm has no such tensor. `phantom`
/// is the phantom mass exp(b_h - lse) of arms with a sink term.
struct ArmRun {
  at::Tensor o, lse, phantom, dq, dk, dv, db, dtau, dw, dc;
};

/// The attention step of one arm call: arm_attention on a backend, or a call of one's own (a kernel
/// composition under test, a stand-in, a planted fault).
using ArmAttend = std::function<AttentionResult(const ArmSpec&, const ArmLayerParams&, const at::Tensor& q,
                                                const PreparedKeys&)>;

/// One arm call with `attend` as its attention; `gate_backend` decides the gate (prepare_keys). Clears
/// the leaves' gradients first, so a set of leaves can be run again.
ArmRun run_arm_with(const ArmSpec& arm, const ArmLeaves& leaves, AttentionBackend gate_backend,
                    const ArmAttend& attend, bool lse_in_loss = false);

/// run_arm_with on `backend` (arm_attention).
ArmRun run_arm(const ArmSpec& arm, const ArmLeaves& leaves, AttentionBackend backend, bool lse_in_loss = false);

/// A yardstick with the flash kernels' rounding of P: scores, routing bias, sink and softmax in
/// float32 (the kernels' accumulators), then P rounded to q's dtype before P . v, whose result is
/// rounded too; autograd then rounds dP and dv as products in that dtype (the reference backend
/// rounds only o). Square causal attention (Tq = Tk), no key mask; lse float32, nats.
/// Throws std::invalid_argument for Tq != Tk or a key mask.
AttentionResult attention_rounding_p(const AttentionInputs& in);

/// attention_rounding_p as the attention step of run_arm_with, with lse in the loss unless
/// `lse_in_loss` is false.
ArmRun run_arm_rounding_p(const ArmSpec& arm, const ArmLeaves& leaves, bool lse_in_loss = true);

/// A yardstick with a flash kernel's own arithmetic, forward and backward (FlashAttention-2's, as
/// LibTorch's flash kernels and cuDNN's implement it): softmax of the float32 scores, routing bias
/// and sink; o = P v rounded to q's dtype; in the backward, dP = dO v^T from the rounded dO,
/// D_i = dO_i . o_i - dlse_i from the rounded o, dS = P (dP - D) rounded to q's dtype before
/// dq = scale dS k and dk = scale dS^T q, dv = P^T dO with P rounded; d r_j = sum_i dS_ij and
/// d b_h = -sum_i p_i D_i in float32 (the flash backend restores those sums, docs/kernels.md).
/// D_i from the rounded o is what no composed-op yardstick shows: on rows whose keys share a large
/// component c, its error times c lands in dq (docs/kernels.md, "The first-use self-check").
/// Square causal attention (Tq = Tk), no key mask; lse float32, nats. Throws std::invalid_argument
/// otherwise. Memory O(T^2) (it keeps P): a yardstick for small cases.
AttentionResult attention_flash_arithmetic(const AttentionInputs& in);

/// attention_flash_arithmetic as the attention step of run_arm_with, with lse in the loss unless
/// `lse_in_loss` is false (to compare with a backend that returns no lse: sdpa).
ArmRun run_arm_flash_arithmetic(const ArmSpec& arm, const ArmLeaves& leaves, bool lse_in_loss = true);

}  // namespace attnlab
