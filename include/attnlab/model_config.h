// Dimensions and arm of a GPT (SPEC section 2). Mirrors the `model:` block of a run's YAML.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "attnlab/arm.h"
#include "attnlab/attention_window.h"
#include "attnlab/name_table.h"

namespace attnlab {

/// The MLP's GELU (config key `model.gelu`).
enum class GeluKind {
  tanh,  ///< GPT-2's tanh approximation (at::gelu's "tanh")
  erf,   ///< the exact GELU x Phi(x) (at::gelu's "none"; GPT-NeoX / Pythia)
};

/// tanh | erf.
template <> const NameTable<GeluKind>& name_table<GeluKind>();
std::string to_string(GeluKind gelu);

struct ModelConfig {
  std::string arm = "baseline";            ///< one of all_arms()
  int64_t n_layer = 2;                     ///< transformer blocks
  int64_t n_head = 2;                      ///< attention heads per block
  int64_t d_model = 128;                   ///< residual width
  int64_t block_size = 256;                ///< context length (tokens)
  int64_t vocab_size = 4096;               ///< real vocabulary; the embedding is padded (padded_vocab)
  GateKind routing_gate = GateKind::norm;  ///< gate form of routing-slot arms (renorm)

  // Architecture options beyond GPT-2 (GPT-NeoX / Pythia; docs/interop.md). Each is off by default,
  // so a config without them is the GPT-2 model of SPEC section 2; each composes with every arm.
  double rotary_fraction = 0.0;    ///< 0: learned absolute positions (wpe). > 0: no wpe; rotary position
                                   ///< embeddings on the first rotary_dims() channels of every head's q, k
  double rotary_base = 10000.0;    ///< theta of the rotary frequencies theta^(-2i / rotary_dims)
  bool parallel_residual = false;  ///< x + attn(ln_1 x) + mlp(ln_2 x) instead of two sequential residuals
  bool untied_head = false;        ///< a separate LM head lm_head.weight [padded_vocab, d_model]
  GeluKind gelu = GeluKind::tanh;  ///< MLP activation: tanh (GPT-2's approximation) | erf (exact GELU)

  // Sliding windows (docs/windows.md). Unset: every layer global, and the keys are not written, so a
  // config without them keeps its bytes and its hash. normalize_window() gives one spelling per model.
  std::optional<int64_t> window;               ///< W >= 1: a local layer's query i sees keys i - W < j <= i
  std::optional<std::string> window_pattern;   ///< L (local) / G (global) per block, repeated over depth; unset: all L
  std::optional<int64_t> window_keep_first;    ///< n >= 0: the first n positions stay visible (StreamingLLM)

  int64_t head_dim() const { return d_model / n_head; }
  /// vocab_size rounded up to a multiple of 64 (50257 -> 50304), as in nanoGPT / llm.c.
  int64_t padded_vocab() const { return (vocab_size + 63) / 64 * 64; }
  /// Rotated channels per head: floor(rotary_fraction * head_dim), as GPT-NeoX counts them; 0 = off.
  int64_t rotary_dims() const;
  /// The arm's spec with the configured routing gate applied, looked up by name: a model resolves it
  /// once, at construction (GPTImpl::arm()).
  ArmSpec arm_spec() const { return with_routing_gate(arm_by_name(arm), routing_gate); }
  /// Whether block `layer` (0-based) is local: a window is set and the pattern's letter
  /// layer mod len(pattern) is L (no pattern: every block). Positions count the sink token.
  bool layer_is_local(int64_t layer) const;
  /// The window of block `layer`'s attention: {W, n} when local, none when global.
  AttentionWindow layer_window(int64_t layer) const;
  /// True when some block is local (after normalize_window(), whether the model has a window at all).
  bool has_local_layer() const;
  /// Throws std::invalid_argument naming the first impossible value (unknown arm, d_model not
  /// divisible by n_head, non-positive sizes, rotary_fraction outside [0, 1] or giving an odd or zero
  /// rotary_dims(), rotary_base <= 0, a gelu value cast from an integer outside GeluKind, a window
  /// key of docs/windows.md's "Refused" list; the message names the key).
  void validate() const;
};

/// One spelling per windowed model (docs/windows.md, "Normalised when read"): with a window, the
/// pattern expanded to one letter per block and keep_first written; a window that hides nothing (no
/// L in the pattern, or W + n >= the most positions a sequence has: block_size, + 1 for sink_token)
/// removes all three keys. Call after validate() succeeds; a config without a window is unchanged.
void normalize_window(ModelConfig& cfg);

/// The warning of a pattern longer than n_layer (its tail unused), or "" (docs/windows.md, "Warning").
std::string window_pattern_warning(const ModelConfig& cfg);

/// Parameter counts of a model with this config (SPEC section 2: "non-embedding" excludes the token
/// and position embeddings; the tied LM head is not counted twice, an untied one counts as embedding).
struct ParamCounts {
  int64_t total = 0;
  int64_t non_embedding = 0;  ///< total - wte - wpe - lm_head
  int64_t arm_extra = 0;      ///< parameters the arm adds (SPEC section 1's table)
};
ParamCounts count_params(const ModelConfig& cfg);

}  // namespace attnlab
