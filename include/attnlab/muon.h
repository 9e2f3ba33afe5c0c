// Muon (Keller Jordan, "Muon: An optimizer for hidden layers in neural networks", 2024; the reference
// muon.py and modded-nanogpt): momentum orthogonalised by a Newton-Schulz iteration on the blocks'
// hidden matrices, AdamW on every other parameter (embeddings, the LM head, biases, gains, arm
// parameters).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

namespace attnlab {

/// The quintic's coefficients (a, b, c) of the reference, chosen there to maximise the slope at 0.
inline constexpr double kNewtonSchulzA = 3.4445, kNewtonSchulzB = -4.7750, kNewtonSchulzC = 2.0315;
/// The reference's iteration count.
inline constexpr int64_t kNewtonSchulzSteps = 5;

/// The approximate orthogonalisation U S' V^T of g = U S V^T, for g of shape [..., rows, cols] (each
/// trailing matrix separately), computed in float32 and returned in g's dtype and shape:
///   X = g / (||g||_F + 1e-7)  (transposed first when rows > cols, so X X^T is the smaller product)
///   repeat `steps` times:  A = X X^T;  X = a X + (b A + c A A) X
/// S' is not the identity: the quintic trades convergence for slope, so the singular values land
/// in about [0.7, 1.2] (the reference says roughly U(0.5, 1.5)). The reference runs it in bfloat16
/// on the GPU for speed; attnlab runs float32 on every device, so CPU and CUDA runs and the tests'
/// plain loop see the same numbers to float32 rounding, at a cost that is small at these sizes.
/// Throws std::invalid_argument for g of fewer than 2 dimensions.
at::Tensor newton_schulz(const at::Tensor& g, int64_t steps = kNewtonSchulzSteps);

/// torch::optim::Optimizer over two kinds of group:
/// - AdamWOptions groups: FusedAdamW's update (fused_adamw_step, fused_adamw.h), at their own lr;
/// - SGDOptions groups: Muon's matrices. Their hyperparameters are SGD-momentum's (lr, momentum mu,
///   nesterov, weight_decay lambda; dampening must be 0) and their state SGD's momentum_buffer
///   (SGDParamState), so checkpoints store them as SGD's (docs/checkpoints.md). Per parameter W with
///   gradient g, as the reference's muon_update:
///     buf <- mu buf + (1 - mu) g                    (buf starts at 0)
///     u   <- (1 - mu) g + mu buf  (nesterov)  or  buf
///     O   <- newton_schulz(u), each of the `blocks` row blocks [rows, cols] of W separately
///     W   <- W (1 - lr lambda) - lr sqrt(max(1, rows / cols)) O
///   (the heavy-ball form buf = mu buf + g, u = g + mu buf is (1 - mu)^-1 times this u, which the
///   iteration's normalisation cancels up to its 1e-7).
/// Parameters without a gradient are skipped; sparse gradients are refused (std::invalid_argument).
class Muon : public torch::optim::Optimizer {
 public:
  /// `blocks`: by parameter TensorImpl, the row blocks of a momentum group's matrix (1 when absent).
  /// Throws std::invalid_argument for a momentum group's parameter that is not 2-D or whose rows do
  /// not split into its blocks, or a group with dampening.
  Muon(const std::vector<torch::optim::OptimizerParamGroup>& groups, std::unordered_map<const void*, int64_t> blocks);
  at::Tensor step(LossClosure closure = nullptr) override;

 private:
  std::unordered_map<const void*, int64_t> blocks_;
};

}  // namespace attnlab
