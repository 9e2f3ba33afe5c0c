#include "attnlab/arm_params.h"
#include "attnlab/model.h"
#include "attnlab/output_gate.h"
#include "attnlab/rotary.h"

namespace attnlab {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const ModelConfig& cfg, const ArmSpec& arm, int64_t layer)
    : arm_(arm), window_(cfg.layer_window(layer)), n_head_(cfg.n_head), d_model_(cfg.d_model), rotary_dims_(cfg.rotary_dims()),
      rotary_base_(cfg.rotary_base) {
  c_attn = register_module("c_attn", torch::nn::Linear(cfg.d_model, 3 * cfg.d_model));
  c_proj = register_module("c_proj", torch::nn::Linear(cfg.d_model, cfg.d_model));
  for (const auto& p : attention_params(arm, cfg.n_head, cfg.head_dim())) {
    at::Tensor& param = register_parameter(p.name, torch::full(p.shape, p.init_value));
    if (p.param == ArmParam::out_gate_w) out_gate_w = param;  // outside the attention: no kernel sees it
    else if (p.param == ArmParam::out_gate_c) out_gate_c = param;
    else arm_param_slot(params_, p.param) = param;
  }
}

namespace {

/// Entries [0, n) and the last `recent` of a cache's [B, H, T(, d)] tensor (dim 2).
at::Tensor kept_entries(const at::Tensor& t, int64_t n, int64_t recent) {
  if (!t.defined()) return t;
  return at::cat({t.narrow(2, 0, n), t.narrow(2, t.size(2) - recent, recent)}, 2);
}

/// What a local layer's cache needs for the next token: the first n positions and the W - 1 most
/// recent ones (docs/windows.md, "KV-cache decoding"). Held entries stay "kept, then a run of
/// consecutive positions", so the window rule on entry indices is the rule on positions.
void trim_to_window(PreparedKeys& keys, const AttentionWindow& window) {
  const int64_t n = window.keep_first, recent = window.window - 1;
  if (!window.local() || keys.k.size(2) - recent <= n) return;  // (no n + recent: it may overflow)
  for (auto* t : {&keys.k, &keys.v_read, &keys.routing_bias, &keys.gate}) *t = kept_entries(*t, n, recent);
}

}  // namespace

at::Tensor CausalSelfAttentionImpl::forward(const at::Tensor& x, int64_t layer,
                                            const ForwardHooks* hooks, PreparedKeys* cache, int64_t first_position) {
  const int64_t B = x.size(0), T = x.size(1), d = d_model_ / n_head_;
  auto heads = [&](const at::Tensor& t) { return t.view({B, T, n_head_, d}).transpose(1, 2); };
  auto qkv = c_attn(x).split(d_model_, /*dim=*/2);
  auto q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);  // (B, H, T, d)
  if (rotary_dims_ > 0) {  // positions continue after the cached ones when decoding
    q = apply_rotary(q, first_position, rotary_dims_, rotary_base_);
    k = apply_rotary(k, first_position, rotary_dims_, rotary_base_);
  }
  if (hooks && hooks->edit_values) v = hooks->edit_values(layer, v);

  const auto& params = params_;
  PreparedKeys keys = prepare_keys(arm_, params, k, v, hooks && hooks->read_norms, backend);
  if (cache) {
    if (cache->k.defined()) {
      auto cat = [](const at::Tensor& a, const at::Tensor& b) { return a.defined() ? at::cat({a, b}, 2) : b; };
      keys.k = cat(cache->k, keys.k);
      keys.v_read = cat(cache->v_read, keys.v_read);
      if (keys.routing_bias.defined()) keys.routing_bias = cat(cache->routing_bias, keys.routing_bias);
      if (keys.gate.defined()) keys.gate = cat(cache->gate, keys.gate);
    }
  }
  const bool want_probs = hooks && hooks->return_probs;
  auto att = arm_attention(arm_, params, q, keys, want_probs, backend, window_);
  if (cache) {
    *cache = keys;
    cache->read_norm = at::Tensor();  // of the new tokens only: no cache reads it
    trim_to_window(*cache, window_);
  }
  // The output gate needs only this position's x, so decoding computes it for the new tokens alone.
  at::Tensor gamma;
  if (arm_.out_gate != OutputGate::none) gamma = output_gate_values(x, out_gate_w, out_gate_c);
  if (hooks && hooks->on_attention) {
    // Options from q, not lse: the sdpa backend leaves lse undefined.
    auto sink = effective_sink_logit(arm_, params, n_head_,
                                     q.options().dtype(attention_acc_dtype(q.scalar_type())));
    hooks->on_attention(LayerTrace{layer, q, keys, att, sink, gamma, window_});
  }
  return c_proj(gated_heads(att.o, gamma, arm_.out_gate));  // (B, T, C)
}

MLPImpl::MLPImpl(int64_t d_model, GeluKind gelu) : gelu_approximate_(gelu == GeluKind::erf ? "none" : "tanh") {
  c_fc = register_module("c_fc", torch::nn::Linear(d_model, 4 * d_model));
  c_proj = register_module("c_proj", torch::nn::Linear(4 * d_model, d_model));
}

at::Tensor MLPImpl::forward(const at::Tensor& x) {
  return c_proj(at::gelu(c_fc(x), gelu_approximate_));
}

BlockImpl::BlockImpl(const ModelConfig& cfg, const ArmSpec& arm, int64_t layer)
    : parallel_residual_(cfg.parallel_residual) {
  ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.d_model})));
  attn = register_module("attn", CausalSelfAttention(cfg, arm, layer));
  ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.d_model})));
  mlp = register_module("mlp", MLP(cfg.d_model, cfg.gelu));
}

at::Tensor BlockImpl::forward(const at::Tensor& x, int64_t layer, const ForwardHooks* hooks,
                              PreparedKeys* cache, int64_t first_position) {
  auto a = attn->forward(ln_1(x), layer, hooks, cache, first_position);
  if (parallel_residual_) return mlp->forward(ln_2(x)) + a + x;  // GPT-NeoX's order of the sum
  auto y = x + a;
  return y + mlp->forward(ln_2(y));
}

}  // namespace attnlab
