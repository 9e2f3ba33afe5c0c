// Whether a config's attention.backend can run its model (docs/config.md, "attention.backend"),
// asked of the backend table (backend_table.h) with the requests the run's attention calls will make,
// so that a config and a call cannot disagree. Internal to the core library; validate() calls it.
#pragma once

#include "attnlab/run_config.h"

namespace attnlab {

/// Throws ConfigError "attention.backend: <name> cannot run on <device> in <dtype> (train.device: ...,
/// train.precision: ...)[, layer <l> (local)]: <the row's refusal>; use <the backends that serve every
/// request>" when the backend refuses some call of the run on every device train.device allows (cpu,
/// cuda, or both for auto: a config that could run where the run lands is accepted, and on the other
/// device the call refuses with the same words). The calls: one per distinct layer window, square
/// causal over the most positions a sequence has (model.block_size, plus 1 for sink_token), in the
/// dtype the device computes in (bfloat16 on CUDA under train.precision: bf16, else float32; the CPU
/// always runs float32), compute capability unknown, no probabilities, no key mask. The message
/// names the first device's first refused call.
void check_backend_serves_model(const RunConfig& c);

}  // namespace attnlab
