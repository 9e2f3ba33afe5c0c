// The parameters an arm adds, their initial values and their weight-decay rule (SPEC section 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnlab/arm.h"
#include "attnlab/name_table.h"

namespace attnlab {

/// Fixed gate sharpness beta of the norm gate (SPEC section 1).
inline constexpr double kNormGateBeta = 8.0;
/// tau_h init -4/beta = -0.5, so every norm gate starts at sigmoid(4) ~ 0.982.
inline constexpr double kNormGateTauInit = -4.0 / kNormGateBeta;
/// Projection gate bias c_h init 4 (w_h init 0), so the gate also starts at sigmoid(4).
inline constexpr double kProjGateBiasInit = 4.0;
/// Output gate bias c_g init 4 (W_g init 0): every output gate starts at sigmoid(4), nearly open,
/// like the norm and projection gates; the paper's code starts near sigmoid(0) (docs/arms.md).
inline constexpr double kOutGateBiasInit = 4.0;
/// Std of the normal init of the learned sink token e_sink (as the token embedding, GPT-2).
inline constexpr double kSinkTokenInitStd = 0.02;

/// The parameters an arm may add to an attention layer (SPEC section 1), each named once by its table:
/// code that places a parameter switches on the value, never on the name.
enum class ArmParam {
  sink_logit,  ///< b_h (learned sink)
  gate_tau,    ///< tau_h (norm gate)
  gate_w,      ///< w_h (projection gate)
  gate_c,      ///< c_h (projection gate)
  out_gate_w,  ///< W_g (output gate)
  out_gate_c,  ///< c_g (output gate)
};

/// sink_logit | gate_tau | gate_w | gate_c | out_gate_w | out_gate_c: the names inside the attention
/// module, hence of the tensors in checkpoints and exports (docs/checkpoints.md).
template <> const NameTable<ArmParam>& name_table<ArmParam>();
std::string to_string(ArmParam param);

/// One parameter an arm adds to each attention layer.
struct ArmParamSpec {
  ArmParam param;
  std::string name;            ///< to_string(param), e.g. "sink_logit"
  std::vector<int64_t> shape;  ///< e.g. {H} or {H, head_dim}
  double init_value = 0.0;     ///< constant init (every arm parameter except e_sink)
  bool weight_decay = false;   ///< always false for arm parameters (SPEC section 1)
};

/// Per-layer parameters of `arm` (after with_routing_gate): sink_logit [H] (learned sink),
/// gate_tau [H] (norm gate), gate_w [H, head_dim] and gate_c [H] (projection gate), out_gate_w
/// [d_model, G] and out_gate_c [G] (output gate; G = H headwise, H * head_dim elementwise,
/// d_model = H * head_dim). None takes weight decay, out_gate_w included (docs/arms.md).
std::vector<ArmParamSpec> attention_params(const ArmSpec& arm, int64_t n_head, int64_t head_dim);

/// Number of parameters `arm` adds to a model with these dims: per-layer params times n_layer,
/// plus d_model for the sink token. Matches SPEC section 1's table.
int64_t arm_extra_params(const ArmSpec& arm, int64_t n_layer, int64_t n_head, int64_t head_dim,
                         int64_t d_model);

}  // namespace attnlab
