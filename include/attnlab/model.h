// GPT-2-style pre-LayerNorm decoder whose attention is an arm (SPEC section 2). Read it like
// nanoGPT's model.py: embeddings, a stack of blocks, a final LayerNorm, the tied LM head. The
// ModelConfig options for GPT-NeoX (rotary positions, parallel residual, untied head, exact GELU)
// change only the lines that name them (docs/interop.md).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "attnlab/arm_attention.h"
#include "attnlab/model_config.h"

namespace attnlab {

/// What one layer's attention computed, handed to ForwardHooks::on_attention.
struct LayerTrace {
  int64_t layer;
  const at::Tensor& q;                ///< [B, H, T, d]
  const PreparedKeys& keys;           ///< gated reads, gates, read norms (if asked)
  const AttentionResult& attention;   ///< o, lse, probs (if asked)
  const at::Tensor& sink_logit;       ///< [H] effective b_h (zeros for off_by_one), or undefined
  const at::Tensor& out_gate;         ///< [B, T, H] or [B, T, H d] output gate values in (0, 1), or undefined
  const AttentionWindow& window;      ///< the layer's window (none: a global layer; docs/windows.md)
};

/// Optional probes into a forward pass. Positions include the sink token for the sink_token arm.
struct ForwardHooks {
  bool return_probs = false;  ///< fill attention.probs [B, H, T, T] (one layer at a time)
  bool read_norms = false;    ///< fill keys.read_norm [B, H, T]
  /// Called after each layer's attention, layer by layer.
  std::function<void(const LayerTrace&)> on_attention;
  /// Replaces the raw value reads v [B, H, T, d] of a layer before any gate (junk injection, SPEC 4).
  std::function<at::Tensor(int64_t layer, const at::Tensor& v)> edit_values;
  /// Sees (and may replace) the residual stream [B, T, d_model] after block l; l = 0 is the
  /// embedding output, l = n_layer the input of the final LayerNorm (SPEC section 5).
  std::function<at::Tensor(int64_t layer, const at::Tensor& x)> on_residual;
};

/// Per-layer prepared keys of what decoding needs (SPEC section 1, KV cache): a global layer holds
/// every position so far; a local layer the first keep_first positions and the window - 1 most
/// recent ones (docs/windows.md, "KV-cache decoding").
struct KVCache {
  std::vector<PreparedKeys> layers;
  int64_t positions = 0;  ///< positions decoded so far (the sink token included), whatever the layers hold
  int64_t length() const { return positions; }
};

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  /// Block `layer`'s attention: its window is cfg.layer_window(layer).
  CausalSelfAttentionImpl(const ModelConfig& cfg, const ArmSpec& arm, int64_t layer);
  /// x [B, T, d_model] (ln_1's output) -> [B, T, d_model]: c_proj of the heads' outputs, each
  /// times its output gate when the arm has one. With `cache`, the new keys are appended to it and the
  /// queries attend to everything cached; `first_position` is the position of x's first token (the
  /// count the cache has seen; 0 without a cache). A local layer trims its cache to what the next
  /// token's window needs.
  at::Tensor forward(const at::Tensor& x, int64_t layer, const ForwardHooks* hooks = nullptr,
                     PreparedKeys* cache = nullptr, int64_t first_position = 0);
  /// The arm's parameters of this layer, the registered tensors themselves (filled at construction;
  /// to(device) and loading a checkpoint change their data in place).
  const ArmLayerParams& arm_params() const { return params_; }

  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  /// Output gate (arm.out_gate != none): W_g [d_model, G], c_g [G]; undefined otherwise.
  at::Tensor out_gate_w, out_gate_c;
  AttentionBackend backend = AttentionBackend::reference;

 private:
  ArmSpec arm_;
  ArmLayerParams params_;
  AttentionWindow window_;  ///< none for a global layer
  int64_t n_head_, d_model_;
  int64_t rotary_dims_;  ///< 0 = no rotary (ModelConfig::rotary_dims)
  double rotary_base_;
};
TORCH_MODULE(CausalSelfAttention);

class MLPImpl : public torch::nn::Module {
 public:
  /// gelu: tanh (GPT-2's approximation) or erf (exact), as ModelConfig::gelu.
  MLPImpl(int64_t d_model, GeluKind gelu);
  at::Tensor forward(const at::Tensor& x);  ///< c_proj(GELU(c_fc x)), width 4 d_model
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};

 private:
  std::string gelu_approximate_;  ///< at::gelu's "tanh" or "none"
};
TORCH_MODULE(MLP);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelConfig& cfg, const ArmSpec& arm, int64_t layer);
  /// x + attn(ln_1 x), then + mlp(ln_2 .) of that; with parallel_residual x + attn(ln_1 x) + mlp(ln_2 x).
  at::Tensor forward(const at::Tensor& x, int64_t layer, const ForwardHooks* hooks = nullptr,
                     PreparedKeys* cache = nullptr, int64_t first_position = 0);
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  MLP mlp{nullptr};

 private:
  bool parallel_residual_;
};
TORCH_MODULE(Block);

class GPTImpl : public torch::nn::Module {
 public:
  /// Builds the model with constant-initialised arm parameters; call init_parameters() (init.h)
  /// for the seeded initialisation. Throws std::invalid_argument if cfg.validate() fails.
  explicit GPTImpl(ModelConfig cfg);

  /// idx [B, T] int64 token ids (T <= block_size) -> logits [B, T, vocab_size] (the padded columns
  /// are dropped, as llm.c does). The sink_token arm prepends e_sink and drops its output.
  /// Throws std::invalid_argument for T > block_size or a bad shape.
  at::Tensor forward(const at::Tensor& idx, const ForwardHooks* hooks = nullptr);

  /// Incremental decoding: idx [B, Tn] new tokens -> logits [B, Tn, vocab_size]; appends their
  /// prepared keys to `cache`. Equals forward() on the whole sequence (tested).
  at::Tensor forward_cached(const at::Tensor& idx, KVCache& cache);

  /// True when the parameter called `name` (as in named_parameters()) takes weight decay:
  /// 2-D matrices and embeddings yes; 1-D parameters and every arm parameter no (SPEC section 1).
  bool decays(const std::string& name) const;

  /// Attention backend of every layer.
  void set_attention_backend(AttentionBackend backend);

  const ModelConfig& config() const { return cfg_; }
  const ArmSpec& arm() const { return arm_; }

  torch::nn::Embedding wte{nullptr};
  torch::nn::Embedding wpe{nullptr};  ///< learned positions; none with rotary positions (rotary_fraction > 0)
  torch::nn::ModuleList h{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear lm_head{nullptr};  ///< untied_head only: weight [padded_vocab, d_model], no bias
  at::Tensor sink_token;  ///< [d_model] e_sink (sink_token arm only)

 private:
  at::Tensor embed(const at::Tensor& idx, int64_t first_position, bool prepend_sink);
  at::Tensor run_blocks(at::Tensor x, const ForwardHooks* hooks, KVCache* cache);
  at::Tensor head(const at::Tensor& x);

  ModelConfig cfg_;
  ArmSpec arm_;
  std::set<std::string> no_decay_arm_params_;
};
TORCH_MODULE(GPT);

/// Mean next-token cross-entropy in nats/token: logits [B, T, V], targets [B, T] int64.
at::Tensor lm_loss(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace attnlab
