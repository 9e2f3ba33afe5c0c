// Measurements on trained models (SPEC section 4, paper 000's second half): how much attention the
// first key takes, how quiet its read is, the phantom mass of a sink logit, how much attention lands
// on quiet reads (exposure), and what a gate does; the extreme-token phenomena of Guo et al. 2024
// (value-state drain, residual-state peak, active and dormant heads), the chance level of every
// first-key mass, and Bondarenko et al.'s outlier statistics (outlier_stats.h). docs/probes.md
// states every convention.
//
// The statistics are pure functions of tensors (probabilities, read norms, phantom mass, gates) so
// tests can feed hand-made ones; probe_model() runs a checkpoint's reference attention layer by layer
// and feeds them. Everything accumulates in float64.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/attention_window.h"
#include "attnlab/batch_sampler.h"
#include "attnlab/model_config.h"
#include "attnlab/name_table.h"

namespace attnlab {

class GPTImpl;
class Progress;

/// A head counts as an attention sink when its mean attention to key 0, over every query that sees
/// it (i >= 0), exceeds this (the threshold of the attention-sink literature, e.g. Gu et al. 2024).
inline constexpr double kSinkRateThreshold = 0.3;

/// Which reads count as quiet: ||v_j|| strictly below the head's median or 25th percentile
/// (SPEC section 4), the percentile taken per (sequence, head) over all T positions with linear
/// interpolation (numpy's default). Ties with the cutoff are not quiet; T = 1 selects nothing.
enum class QuietCutoff { median, p25 };

/// median | p25.
template <> const NameTable<QuietCutoff>& name_table<QuietCutoff>();

/// The cutoff called `name`; throws std::invalid_argument naming the value and the valid names.
QuietCutoff parse_quiet_cutoff(const std::string& name);
std::string to_string(QuietCutoff cutoff);

/// The cutoff read norm per (sequence, head): read_norm [B, H, T] -> [B, H] float64 (the median, or
/// the 25th percentile, of the T norms). Throws std::invalid_argument for a tensor that is not 3-D.
at::Tensor read_norm_cutoff(const at::Tensor& read_norm, QuietCutoff cutoff);

/// Quiet reads: read_norm [B, H, T] -> bool [B, H, T], true where ||v_j|| < read_norm_cutoff.
at::Tensor quiet_reads(const at::Tensor& read_norm, QuietCutoff cutoff);

/// What a probed model has, which decides the measures that apply (ProbeMeasure::applies): a sink
/// term, a gate, an output gate, and for a windowed model each layer's type.
struct ProbeFeatures {
  bool sink = false, gate = false, out_gate = false;
  std::vector<bool> local_layers;  ///< per layer, true for a local one; empty for a model without a window
  bool triggers = false;           ///< the probe was given trigger tokens (the trigger / other masses apply)
  /// A model with a window: its summary carries layer types and by-type means (docs/windows.md).
  bool windowed() const { return !local_layers.empty(); }
};

/// The features of a model of `cfg` (its arm, routing gate applied, and its window pattern).
ProbeFeatures probe_features(const ModelConfig& cfg);

/// One layer's attention for one batch, as the probe reads it. Positions include sink_token's
/// learned token (position 0).
struct LayerProbeInputs {
  at::Tensor probs;      ///< [B, H, T, T] a_ij over keys (causal: zero above the diagonal); any float dtype
  at::Tensor read_norm;  ///< [B, H, T] ||v_j|| of the ungated value reads
  at::Tensor phantom;    ///< [B, H, T] p_i (SPEC section 1), or undefined for an arm without a sink
  at::Tensor gate;       ///< [B, H, T] g_j, or undefined for an arm without a gate
  at::Tensor out_gate;   ///< [B, T, H] or [B, T, H d] output gate values (head-major), or undefined
  AttentionWindow window;  ///< the layer's window (none: global); decides which queries see key 0
  at::Tensor trigger;      ///< [B, T] bool: query i's input token is a trigger token; undefined without
                           ///< trigger tokens (trigger_queries())
};

/// Trigger queries (Guo et al. 2024, arXiv 2410.13835, section 2: the tokens on which a dormant head
/// wakes): idx [B, T] int64 token ids -> [B, T'] bool, true where the token is in `tokens`; with
/// `sink_token`, T' = T + 1 in the model's positions (the learned token at position 0 is never a
/// trigger). Throws std::invalid_argument for an idx that is not 2-D.
at::Tensor trigger_queries(const at::Tensor& idx, const std::vector<int64_t>& tokens, bool sink_token);

/// An output gate counts as closed below this: the paper's "sparsity" of gating scores (Qiu et al. 2025).
inline constexpr double kOutGateSparseThreshold = 0.1;

/// Float64 sum and count per head: the running mean of one measure.
struct HeadMeans {
  std::vector<double> sum, count;
  explicit HeadMeans(int64_t n_head = 0) : sum(size_t(n_head), 0.0), count(size_t(n_head), 0.0) {}
  void add(int64_t head, double s, double n) { sum[size_t(head)] += s; count[size_t(head)] += n; }
  /// sum / count; NaN when nothing was added (e.g. T = 1 for the read-norm ratio).
  double mean(int64_t head) const;
};

/// The per-head statistics of one layer, accumulated over batches (SPEC section 4; under a window,
/// docs/windows.md, "Probes under a window"):
///  - first_key_mass:   mean over sequences and queries i >= 1 that see key 0 of a_i0 (query 0 is
///                      excluded: it sees only key 0, so a_00 = 1 - p_0 carries no choice; without a
///                      window every query sees key 0);
///  - sink_score:       mean over sequences and queries i >= 0 that see key 0 of a_i0 (for
///                      kSinkRateThreshold);
///  - oldest_key_mass:  mean over sequences and queries with at least two visible keys of a_{i, m(i)},
///                      m(i) = min V(i) the oldest key the query sees (key 0 on a global layer);
///  - phantom_mass:     mean over sequences and queries i >= 0 of p_i (no sink: stays empty);
///  - read_norm_ratio:  mean over sequences of ||v_0|| / median_{j >= 1} ||v_j|| (T >= 2 and a
///                      positive median only);
///  - exposure:         mean over sequences and queries i >= 0 of sum_j a_ij [j quiet at p25]:
///                      the share of each query's whole attention (phantom included in the
///                      denominator) that lands on reads below the 25th percentile;
///  - gate_mean, gate_closed_share: mean over reads of g_j and of [g_j < 0.5] (gated arms only);
///  - out_gate_mean, out_gate_sparse_share: mean over sequences, queries i >= 0 and the head's
///                      gate values (1 headwise, d elementwise) of gamma and of [gamma < 0.1]
///                      (output-gate arms only);
///  - trigger_key_mass, other_key_mass: first_key_mass over the queries whose token is a trigger
///                      token, and over the others (LayerProbeInputs::trigger defined only);
///  - *_chance:         the same means of 1 / |V(i)|, the mass uniform attention over the keys query
///                      i sees would put on key 0 (on the oldest key for oldest_key_chance); a sink
///                      term is no key and does not count;
///  - value_drain:      mean over sequences of ||v_0|| / median_j ||v_j||, j over all T positions
///                      (Guo et al. 2024's value-state drain; sequences with a zero median skipped).
/// Per layer (one value, head slot 0; accumulate_residual()), of the residual stream h after the block:
///  - residual_peak:    mean over sequences of ||h_0|| / median_t ||h_t|| (Guo et al.'s residual-state
///                      peak; zero medians skipped);
///  - inf_norm, kurtosis: mean over sequences of outlier_stats() of the block's T x d output.
/// Medians of an even count are the mean of the two middle values (linear interpolation).
struct LayerProbeSums {
  HeadMeans first_key_mass, sink_score, phantom_mass, read_norm_ratio, exposure, gate_mean, gate_closed_share,
      out_gate_mean, out_gate_sparse_share, oldest_key_mass;
  HeadMeans first_key_chance, oldest_key_chance, trigger_key_mass, trigger_key_chance, other_key_mass,
      other_key_chance, value_drain;
  HeadMeans residual_peak, inf_norm, kurtosis;  ///< per layer: one slot
  explicit LayerProbeSums(int64_t n_head = 0);
  int64_t n_head() const { return int64_t(first_key_mass.sum.size()); }
};

/// Adds one batch to `sums`, sequence by sequence in float64. Throws std::invalid_argument naming the
/// tensor when a shape disagrees (probs [B, H, T, T], the others [B, H, T], H = sums.n_head()).
void accumulate_layer(const LayerProbeInputs& in, LayerProbeSums& sums);

/// Adds one batch of the residual stream after the layer's block, x [B, T, d_model] (any float dtype;
/// ForwardHooks::on_residual's layer l + 1 for block l), to the per-layer statistics of `sums`,
/// sequence by sequence in float64. Throws std::invalid_argument for an x that is not 3-D.
void accumulate_residual(const at::Tensor& x, LayerProbeSums& sums);

/// One value of a measure. None where the measure does not apply to the arm (phantom mass without a
/// sink term, gates without a gate); NaN where it applies but nothing was averaged (e.g. the read-norm
/// ratio at T = 1). Both are written as JSON null (common/json_number.h).
using MeasureValue = std::optional<double>;

/// A value per row of probe_measure_table() (probe_measures.h), in the table's order, looked up by
/// measure name.
struct MeasureValues {
  std::vector<MeasureValue> values;  ///< one per row of probe_measure_table()
  MeasureValues();                   ///< every value none
  /// The value of `measure`; throws std::invalid_argument naming it (and the known names) when the
  /// table has no such row.
  MeasureValue& operator[](const std::string& measure);
  const MeasureValue& operator[](const std::string& measure) const;
};

/// One layer of a probe summary.
struct ProbeLayerSummary {
  int64_t layer = 0;
  /// [measures][H]: per-head means, one row per row of probe_measure_table(); empty for the rows
  /// that are not per-head (sink_rate, the per-layer and model-only measures).
  std::vector<std::vector<MeasureValue>> heads;
  /// Per-head measures: the mean over the layer's heads of the finite values (NaN when none is);
  /// sink_rate: the share of the layer's heads whose sink_score > kSinkRateThreshold; per-layer
  /// measures: the layer's value; model-only measures (the maxima over layers): none.
  MeasureValues mean;
  std::optional<bool> local;  ///< the layer's type in a windowed model (true: local); none without a window
  /// heads[] of `measure`; throws std::invalid_argument for an unknown name or one without per-head
  /// values (sink_rate).
  const std::vector<MeasureValue>& head_values(const std::string& measure) const;
};

/// A probe's statistics: per layer, and for the model (per-head measures: the mean over every
/// (layer, head) of the finite values; sink_rate: the share of every head above the threshold;
/// per-layer measures: the mean over layers; the max_* measures: the largest layer value).
struct ProbeSummary {
  std::vector<ProbeLayerSummary> layers;
  MeasureValues model;
  /// A windowed model's means over its local and over its global layers (the model's rule: every
  /// (layer, head) of that type); none without a window, or where the model has no layer of the type.
  std::optional<MeasureValues> local, global;
};

/// Per (layer, head), per layer (mean over heads), model (mean over every head) and the sink rate
/// (share of heads whose sink_score > kSinkRateThreshold), for an arm with (or without) a sink term
/// and a gate: the measures it lacks are none. The measures and their order are
/// probe_measure_table()'s (probe_measures.h); to_json (probe_result.h) writes it.
/// With `features.windowed()`, each layer carries its type and the summary its by-type means.
ProbeSummary probe_summary(const std::vector<LayerProbeSums>& layers, const ProbeFeatures& features);

/// Throws std::invalid_argument naming the first disagreement unless `summary` is one that
/// probe_summary() could have produced for a model of n_layer layers of n_head heads and an arm with
/// (or without) a sink term and a gate: layers numbered 0..n_layer-1, n_head values per per-head
/// measure, shares in [0, 1] and ratios >= 0, and every mean and sink rate equal (to 1e-12 relative)
/// to the one of its per-head values, and no measure that applies none (a file written before the
/// measure). A cached probe.json is reused only when it passes.
/// For a windowed model, the layer types must be `features`' and the by-type means those of the heads.
void check_probe_summary(const ProbeSummary& summary, const ProbeFeatures& features, int64_t n_layer, int64_t n_head);

/// Which validation tokens a probe or injection reads.
struct ProbeDataOptions {
  int64_t sequences = 32;  ///< N
  int64_t length = 0;      ///< T tokens per sequence; 0 = the run's train.seq_len (else block_size)
  int64_t batch_size = 8;  ///< sequences per forward pass (memory only; results do not depend on it
                           ///< for probe, and injection needs >= 2 for structured junk)
  std::optional<uint64_t> seed;  ///< probe only: none = the first N validation sequences; a seed =
                                 ///< N windows drawn by BatchSampler(seed) over the val shards
  std::vector<int64_t> trigger_tokens;  ///< probe only: token ids of the trigger queries; empty = none
  Progress* progress = nullptr;  ///< where forward passes are counted (not owned; not part of the result)
};

/// Runs `model` (reference attention, float32, no autocast, no gradients) over `batches` and returns
/// probe_summary() of every layer. The model's backend is set to reference for the call and restored.
/// `progress` (optional) is told of the batches and counts each one done.
/// `trigger_tokens` (optional) picks the trigger queries (trigger_queries()); without any, the
/// trigger / other masses are none.
ProbeSummary probe_model(GPTImpl& model, const std::vector<Batch>& batches, const c10::Device& device,
                         Progress* progress = nullptr, const std::vector<int64_t>& trigger_tokens = {});

}  // namespace attnlab
