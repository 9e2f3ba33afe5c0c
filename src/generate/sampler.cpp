// KV-cache decoding and the sampling rule of `attnlab sample`.
#include "attnlab/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "common/seed_mix.h"

namespace attnlab {
namespace {

at::Tensor ids_tensor(const std::vector<int64_t>& ids, int64_t begin, int64_t end, const c10::Device& device) {
  return torch::tensor(std::vector<int64_t>(ids.begin() + begin, ids.begin() + end), torch::kLong)
      .view({1, end - begin})
      .to(device);
}

// The last position's logits of logits [1, T, V], as float64 on the CPU.
at::Tensor last_logits(const at::Tensor& logits) { return logits[0][logits.size(1) - 1].to(torch::kCPU, torch::kDouble); }

}  // namespace

double sampling_uniform(uint64_t seed, uint64_t index) {
  return double(seed_mix::splitmix64(seed_mix::mix(seed, index)) >> 11) * 0x1.0p-53;
}

int64_t choose_token(const at::Tensor& logits, const SamplingOptions& options, double u) {
  if (!logits.defined() || logits.dim() != 1 || logits.numel() == 0)
    throw std::invalid_argument("choose_token: expected the logits [V] of one position");
  if (!(options.temperature >= 0)) throw std::invalid_argument("temperature must be >= 0");
  if (options.top_k < 0) throw std::invalid_argument("top_k must be >= 0 (0: every token)");
  const auto x = logits.to(torch::kCPU, torch::kDouble).contiguous();
  const double* v = x.data_ptr<double>();
  const int64_t V = x.numel();
  std::vector<int64_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = 0; i < V; ++i)
    if (std::isnan(v[i])) throw std::invalid_argument("choose_token: NaN logit at token " + std::to_string(i));
  // Largest logits first; equal logits by id, so greedy and the top-k cut both prefer lower ids.
  const int64_t k = options.top_k > 0 ? std::min(options.top_k, V) : V;
  auto before = [v](int64_t a, int64_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
  const double top = v[order[0]];
  if (top == -std::numeric_limits<double>::infinity()) throw std::invalid_argument("choose_token: every logit is -inf");
  if (options.temperature == 0) return order[0];
  // softmax((v - top) / T) over the k kept tokens; the CDF inverted at u (shifting by the top logit
  // keeps exp() finite for any logits and any temperature).
  std::vector<double> weight(k);
  double total = 0.0;
  for (int64_t i = 0; i < k; ++i) total += weight[i] = std::exp((v[order[i]] - top) / options.temperature);
  const double target = u * total;
  double cumulative = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    cumulative += weight[i];
    if (target < cumulative) return order[i];
  }
  return order[0];  // u * total rounded up to the sum: the most likely token (weight 1)
}

int64_t context_start(int64_t start, int64_t position, int64_t block_size) {
  if (position - start <= block_size) return start;
  return position - std::max<int64_t>(1, block_size / 2);
}

void generate_each(GPTImpl& model, const std::vector<int64_t>& prompt, const SamplingOptions& options,
                   const std::function<void(int64_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt must hold at least one token");
  if (options.max_new_tokens < 0) throw std::invalid_argument("generate: max_new_tokens must be >= 0");
  const int64_t vocab = model.config().vocab_size, block = model.config().block_size;
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      throw std::invalid_argument("generate: prompt token " + std::to_string(prompt[i]) + " at index " +
                                  std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const auto device = model.wte->weight.device();
  std::vector<int64_t> seq = prompt;  // the sequence from position `base` on: the context and what follows it
  KVCache cache;
  int64_t base = 0, start = 0, cached_to = 0;  // the cache holds positions [start, cached_to)
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    const int64_t position = base + static_cast<int64_t>(seq.size());  // of the token to choose
    const int64_t next_start = context_start(start, position, block);
    if (next_start != start || cached_to == 0) {
      cache = KVCache{}, start = next_start, cached_to = start;
      seq.erase(seq.begin(), seq.begin() + (start - base));  // no later context reaches back before `start`
      base = start;
    }
    const auto logits =
        last_logits(model.forward_cached(ids_tensor(seq, cached_to - base, position - base, device), cache));
    cached_to = position;
    const int64_t token = choose_token(logits, options, sampling_uniform(options.seed, uint64_t(i)));
    seq.push_back(token);
    on_token(token);
  }
  model.train(was_training);
}

std::vector<int64_t> generate(GPTImpl& model, const std::vector<int64_t>& prompt, const SamplingOptions& options) {
  std::vector<int64_t> out;
  generate_each(model, prompt, options, [&](int64_t token) { out.push_back(token); });
  return out;
}

}  // namespace attnlab
