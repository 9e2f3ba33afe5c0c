// Validation loss on the fixed held-out tokens (SPEC section 3: every arm is judged on one set).
#pragma once

#include <cstdint>
#include <vector>

#include "attnlab/batch_sampler.h"
#include "attnlab/model.h"

namespace attnlab {

/// Mean next-token cross-entropy in nats/token over every target of `val` (exactly the token-weighted
/// mean, batches of `batch_size` sequences), with gradients off and `autocast_bf16` on CUDA.
/// The model is left in the training mode it had.
double evaluate(GPTImpl& model, const ValidationSet& val, int64_t batch_size, const c10::Device& device,
                bool autocast_bf16);

/// One shard's part of that mean: the summed cross-entropy (nats, float64) and the number of targets
/// of validation batches shard, shard + num_shards, shard + 2 num_shards, ... (batches of
/// `batch_size`). Summing the parts of shards 0..num_shards-1 and dividing gives evaluate()'s value,
/// each batch's loss computed exactly as there (data-parallel evaluation, docs/distributed.md). A
/// shard with no batch returns {0, 0}. Throws std::invalid_argument unless 0 <= shard < num_shards.
///
/// With `trigger_tokens` (eval.trigger_tokens), the same targets are also split in two domains:
/// target y[t] is a trigger target when its input x[t] is one of those ids, else an other target;
/// each domain sums its targets' cross-entropies (nats, float64, from the per-token losses in
/// float32 as lm_loss computes them). The split does not touch nats / tokens, which stay as without it.
struct DomainSums {
  double trigger_nats = 0.0;
  int64_t trigger_tokens = 0;
  double other_nats = 0.0;
  int64_t other_tokens = 0;
};
struct LossSum {
  double nats = 0.0;
  int64_t tokens = 0;
  DomainSums domains;  ///< zero without trigger_tokens
};
/// The domains' mean losses, nats/token: NaN for a domain without targets.
struct DomainLosses {
  double trigger = 0.0;
  double other = 0.0;
};
DomainLosses domain_losses(const DomainSums& sums);

LossSum evaluate_sum(GPTImpl& model, const ValidationSet& val, int64_t batch_size, const c10::Device& device,
                     bool autocast_bf16, int64_t shard, int64_t num_shards,
                     const std::vector<int64_t>& trigger_tokens = {});

}  // namespace attnlab
