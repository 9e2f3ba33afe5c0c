// Seeded parameter initialisation of the paired-seed protocol (SPEC section 3): every parameter draws
// from its own generator seeded by (seed, parameter name), so all arms with one seed share identical
// values for every parameter they have in common, and adding an arm's own parameters shifts nothing.
#pragma once

#include <cstdint>
#include <string>

namespace attnlab {

class GPTImpl;

/// 64-bit seed of one parameter: splitmix64 of seed mixed with the FNV-1a hash of `name`.
uint64_t parameter_seed(uint64_t seed, const std::string& name);

/// Initialises every parameter of `model` in place (on its device, whatever it is):
///  - Linear / embedding weights ~ N(0, 0.02); the residual projections (attn.c_proj, mlp.c_proj)
///    ~ N(0, 0.02 / sqrt(2 n_layer)) (GPT-2); biases 0; LayerNorm gains 1;
///  - sink_token ~ N(0, 0.02); the per-layer arm parameters take their constants (arm_params.h).
/// Draws happen on the CPU in float32, so values do not depend on the device.
void init_parameters(GPTImpl& model, uint64_t seed);

}  // namespace attnlab
