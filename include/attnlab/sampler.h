// Text generation from a trained model (`attnlab sample`): KV-cache decoding (GPTImpl::forward_cached,
// SPEC section 1's cached gated reads) with temperature and top-k sampling, deterministic for a seed.
// Token ids only: the command turns text into ids and back with the run's tokenizer (docs/sampling.md).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "attnlab/model.h"

namespace attnlab {

struct SamplingOptions {
  int64_t max_new_tokens = 200;  ///< tokens generated after the prompt (>= 0)
  double temperature = 1.0;      ///< logits are divided by it; 0 = greedy (argmax, lowest id on ties)
  int64_t top_k = 0;             ///< sample among the k most likely tokens only; 0 = all
  uint64_t seed = 0;             ///< draw i uses splitmix64(mix(seed, i)): the same seed, the same text
};

/// The next token from one position's logits [V] (any floating dtype and device; read as float64 on
/// the CPU). Greedy for temperature 0; otherwise softmax(logits / temperature) restricted to the
/// top_k largest logits (ties at the k-th broken towards lower ids), sampled by inverting its CDF at
/// the uniform `u` in [0, 1). Throws std::invalid_argument for a negative temperature or top_k, an
/// empty or non-1-D tensor, or logits that are all -inf or any NaN.
int64_t choose_token(const at::Tensor& logits, const SamplingOptions& options, double u);

/// The uniform in [0, 1) of draw `index` for `seed`: 53 bits of splitmix64(mix(seed, index)).
double sampling_uniform(uint64_t seed, uint64_t index);

/// `prompt` (>= 1 token ids < vocab_size) continued by options.max_new_tokens tokens, decoded with
/// the KV cache: one forward_cached() of the prompt, then one per token, gradients off, on the
/// model's device. The model sees at most model.block_size text tokens: when the context would pass
/// that, it restarts from the last block_size / 2 tokens (the cache rebuilt from them), so a prompt
/// plus continuation of any length works. Returns only the new tokens. Throws std::invalid_argument
/// for an empty prompt or an id outside [0, vocab_size), and as choose_token() does.
std::vector<int64_t> generate(GPTImpl& model, const std::vector<int64_t>& prompt, const SamplingOptions& options);

/// generate(), each new token handed to `on_token` as soon as it is chosen instead of returned, in a
/// memory bounded by the context (`attnlab sample` streams them, so any --tokens prints from the
/// start). Throws as generate() does, and whatever `on_token` throws.
void generate_each(GPTImpl& model, const std::vector<int64_t>& prompt, const SamplingOptions& options,
                   const std::function<void(int64_t)>& on_token);

/// Where the context of the token at sequence position `position` starts, given where the previous
/// one started: the rule generate() follows (exposed so tests can decode by full forward passes
/// over exactly the same contexts). Returns `start` unless position - start > block_size, then
/// position - max(1, block_size / 2).
int64_t context_start(int64_t start, int64_t position, int64_t block_size);

}  // namespace attnlab
