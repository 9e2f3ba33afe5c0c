// Products of config sizes (docs/config.md, "Sizes"), checked for 64-bit overflow when a config is
// validated, so that no product formed later (tokens per step, tokens over the run, parameter
// counts, bytes) can wrap. Internal to the core library; memory_floor is run_config.h's.
#pragma once

#include <cstdint>
#include <string>

#include "attnlab/run_config.h"

namespace attnlab::sizes {

/// train.batch_size * train.seq_len; ConfigError naming both keys when it leaves int64.
int64_t micro_batch_tokens(const RunConfig& cfg);

/// The tokens of the whole run (total_steps * tokens_per_step) fit int64, and the model is small
/// enough for count_params to count in int64 (n_layer d_model^2 + (vocab + block_size) d_model
/// below 2^58). Needs the keys' own checks and tokens_per_step's multiple check done. Throws
/// ConfigError naming the keys.
void check_products(const RunConfig& cfg);

/// `bytes` in the largest binary unit it reaches, one decimal: 1536 -> "1.5 KiB", 2^37 -> "128.0 GiB".
std::string human_bytes(double bytes);

}  // namespace attnlab::sizes
