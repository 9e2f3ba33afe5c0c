#include <stdexcept>
#include <string>

#include "attnlab/arm_params.h"
#include "attnlab/cpu_math.h"
#include "attnlab/model.h"

namespace attnlab {

GPTImpl::GPTImpl(ModelConfig cfg) : cfg_(std::move(cfg)) {
  warm_up_cpu_vector_math();  // main() does it in attnlab's programs; this covers a caller's own
  cfg_.validate();
  arm_ = cfg_.arm_spec();
  wte = register_module("wte", torch::nn::Embedding(cfg_.padded_vocab(), cfg_.d_model));
  if (cfg_.rotary_dims() == 0) wpe = register_module("wpe", torch::nn::Embedding(cfg_.block_size, cfg_.d_model));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t l = 0; l < cfg_.n_layer; ++l) h->push_back(Block(cfg_, arm_, l));
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg_.d_model})));
  if (cfg_.untied_head) {
    lm_head = register_module(
        "lm_head", torch::nn::Linear(torch::nn::LinearOptions(cfg_.d_model, cfg_.padded_vocab()).bias(false)));
  }
  if (arm_.sink_token) sink_token = register_parameter("sink_token", torch::zeros({cfg_.d_model}));
  for (const auto& p : attention_params(arm_, cfg_.n_head, cfg_.head_dim())) {
    if (!p.weight_decay) no_decay_arm_params_.insert(p.name);
  }
  no_decay_arm_params_.insert("sink_token");
}

bool GPTImpl::decays(const std::string& name) const {
  const auto* p = named_parameters().find(name);
  if (!p) throw std::invalid_argument("no parameter named '" + name + "'");
  const auto leaf = name.substr(name.rfind('.') + 1);
  return p->dim() >= 2 && no_decay_arm_params_.count(leaf) == 0;
}

void GPTImpl::set_attention_backend(AttentionBackend backend) {
  for (const auto& block : *h) block->as<Block>()->attn->backend = backend;
}

// Token + position embeddings of idx, whose first token sits at text position `first_position`.
// The sink token carries no position embedding: e_sink is learned, so one would be redundant, and
// text tokens keep the positions they have in every other arm (docs/design.md). With rotary
// positions there is no wpe: the attention layers rotate q and k by sequence index instead.
at::Tensor GPTImpl::embed(const at::Tensor& idx, int64_t first_position, bool prepend_sink) {
  const int64_t B = idx.size(0), T = idx.size(1);
  if (first_position + T > cfg_.block_size) {
    throw std::invalid_argument("sequence of " + std::to_string(first_position + T) +
                                " tokens exceeds model.block_size = " + std::to_string(cfg_.block_size));
  }
  auto x = wte(idx);  // (B, T, C)
  if (wpe) x = x + wpe(at::arange(first_position, first_position + T, idx.options().dtype(at::kLong)));
  if (prepend_sink) x = at::cat({sink_token.view({1, 1, -1}).expand({B, 1, cfg_.d_model}), x}, 1);
  return x;
}

at::Tensor GPTImpl::run_blocks(at::Tensor x, const ForwardHooks* hooks, KVCache* cache) {
  if (hooks && hooks->on_residual) x = hooks->on_residual(0, x);
  if (cache && cache->layers.empty()) cache->layers.resize(cfg_.n_layer);
  const int64_t first_position = cache ? cache->positions : 0;
  for (int64_t l = 0; l < cfg_.n_layer; ++l) {
    x = h[l]->as<Block>()->forward(x, l, hooks, cache ? &cache->layers[l] : nullptr, first_position);
    if (hooks && hooks->on_residual) x = hooks->on_residual(l + 1, x);
  }
  if (cache) cache->positions += x.size(1);
  return x;
}

at::Tensor GPTImpl::head(const at::Tensor& x) {
  auto logits = at::linear(ln_f(x), lm_head ? lm_head->weight : wte->weight);  // tied unless untied_head, (B, T, Vpad)
  // Autograd's backward of a narrow fills a zero tensor and copies into it, even when the narrow keeps
  // every column: skip it when the vocabulary needs no padding.
  if (cfg_.vocab_size == cfg_.padded_vocab()) return logits;
  return logits.narrow(-1, 0, cfg_.vocab_size);
}

at::Tensor GPTImpl::forward(const at::Tensor& idx, const ForwardHooks* hooks) {
  if (idx.dim() != 2) throw std::invalid_argument("GPT input must be [B, T] token ids, got " + c10::str(idx.sizes()));
  auto x = run_blocks(embed(idx, 0, arm_.sink_token), hooks, nullptr);
  if (arm_.sink_token) x = x.narrow(1, 1, idx.size(1));  // drop the sink position
  return head(x);
}

at::Tensor GPTImpl::forward_cached(const at::Tensor& idx, KVCache& cache) {
  if (idx.dim() != 2) throw std::invalid_argument("GPT input must be [B, T] token ids, got " + c10::str(idx.sizes()));
  const bool first = cache.length() == 0;
  const int64_t text_pos = first ? 0 : cache.length() - (arm_.sink_token ? 1 : 0);
  auto x = run_blocks(embed(idx, text_pos, arm_.sink_token && first), nullptr, &cache);
  if (arm_.sink_token && first) x = x.narrow(1, 1, idx.size(1));
  return head(x);
}

at::Tensor lm_loss(const at::Tensor& logits, const at::Tensor& targets) {
  // Half-precision logits (autocast) are upcast: the loss is always at least float32.
  auto flat = logits.reshape({-1, logits.size(-1)});
  if (flat.scalar_type() != at::kDouble) flat = flat.to(at::kFloat);
  return at::cross_entropy_loss(flat, targets.reshape({-1}));
}

}  // namespace attnlab
