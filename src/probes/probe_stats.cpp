// The per-head statistics of SPEC section 4 as functions of one layer's probabilities and reads.
// Each sequence is converted to float64 on its own, so a long context never needs a float64 copy
// of the whole batch's T x T probabilities.
#include "attnlab/probes.h"

#include "attnlab/attention.h"
#include "attnlab/outlier_stats.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace attnlab {
namespace {

void require_shape(const at::Tensor& t, const char* name, at::IntArrayRef shape) {
  if (!t.defined() || t.sizes() != shape)
    throw std::invalid_argument(std::string("probe: ") + name + " must have shape " + c10::str(shape) + ", got " +
                                (t.defined() ? c10::str(t.sizes()) : std::string("undefined")));
}

// Which queries of a layer with `window` each key-0 and oldest-key measure averages (docs/windows.md,
// "Probes under a window"), over T positions: as float64 [T] masks, and each query's oldest key.
struct QuerySets {
  at::Tensor sees_first;  ///< query i sees key 0 (every query without a window)
  at::Tensor choosing;    ///< query i sees at least two keys
  at::Tensor oldest;      ///< [T] int64 m(i) = min V(i)
  at::Tensor after_0;     ///< first_key_mass's queries: i >= 1 and sees key 0
  at::Tensor chance;      ///< [T] float64 1 / |V(i)|: uniform attention over the keys query i sees
};

QuerySets query_sets(int64_t T, const AttentionWindow& window) {
  const auto visible = visible_keys(T, T, window, at::kCPU);  // (T, T)
  QuerySets q;
  q.sees_first = visible.select(1, 0).to(at::kDouble);
  q.choosing = (visible.sum(1) >= 2).to(at::kDouble);
  q.oldest = visible.to(at::kByte).argmax(1);  // the first true column: the oldest visible key
  q.after_0 = q.sees_first.clone();
  q.after_0[0] = 0.0;  // query 0 sees only key 0: no choice
  q.chance = 1.0 / visible.sum(1).to(at::kDouble);  // every query sees itself: |V(i)| >= 1
  return q;
}

// The chance levels of first_key_mass and oldest_key_mass: the same for every head.
void add_chances(const QuerySets& q, int64_t H, LayerProbeSums& s) {
  const double first = (q.chance * q.after_0).sum().item<double>(), n_first = q.after_0.sum().item<double>();
  const double oldest = (q.chance * q.choosing).sum().item<double>(), n_oldest = q.choosing.sum().item<double>();
  for (int64_t h = 0; h < H; ++h) {
    s.first_key_chance.add(h, first, n_first);
    s.oldest_key_chance.add(h, oldest, n_oldest);
  }
}

// first_key_mass and its chance over one set of first_key_mass's queries: `in_set` [T] float64 0/1.
void add_query_subset(const at::Tensor& first, const at::Tensor& in_set, const QuerySets& q, HeadMeans& mass,
                      HeadMeans& chance) {
  const auto sums = (first * in_set).sum(1);  // (H)
  const double n = in_set.sum().item<double>(), c = (q.chance * in_set).sum().item<double>();
  for (int64_t h = 0; h < first.size(0); ++h) {
    mass.add(h, sums[h].item<double>(), n);
    chance.add(h, c, n);
  }
}

// first (H, T) a_i0 of one sequence, trigger [T] bool: the trigger queries against the others.
void add_trigger_masses(const at::Tensor& first, const at::Tensor& trigger, const QuerySets& q, LayerProbeSums& s) {
  const auto a0 = first.to(at::kCPU);
  const auto triggered = trigger.to(at::kCPU).to(at::kDouble) * q.after_0;
  add_query_subset(a0, triggered, q, s.trigger_key_mass, s.trigger_key_chance);
  add_query_subset(a0, q.after_0 - triggered, q, s.other_key_mass, s.other_key_chance);
}

// probs [H, T, T], read_norm [H, T] of one sequence, float64.
// `q`: query_sets() of the layer, the same for every sequence of the batch.
void add_attention(const at::Tensor& probs, const at::Tensor& norms, const AttentionWindow& window, const QuerySets& q,
                   LayerProbeSums& s) {
  const int64_t H = probs.size(0), T = probs.size(1);
  auto first = probs.select(2, 0);                                        // (H, T) a_i0
  auto quiet = quiet_reads(norms.unsqueeze(0), QuietCutoff::p25)[0];      // (H, T)
  auto exposed = (probs * quiet.unsqueeze(1).to(at::kDouble)).sum({1, 2});  // (H) sum_i sum_j a_ij [j quiet]
  const auto& after_0 = q.after_0;
  auto oldest = probs.gather(2, q.oldest.view({1, T, 1}).expand({H, T, 1})).squeeze(2);  // (H, T) a_{i, m(i)}
  // Without a window every query sees key 0: the sums of before windows, bit for bit.
  const auto first_after_0 = !window.local() ? (T > 1 ? first.narrow(1, 1, T - 1).sum(1) : at::zeros({H}, first.options()))
                                             : (first * after_0).sum(1);
  const auto first_all = !window.local() ? first.sum(1) : (first * q.sees_first).sum(1);
  const auto oldest_sum = (oldest * q.choosing).sum(1);
  const double n_after_0 = after_0.sum().item<double>(), n_first = q.sees_first.sum().item<double>();
  const double n_choosing = q.choosing.sum().item<double>();
  for (int64_t h = 0; h < H; ++h) {
    s.first_key_mass.add(h, first_after_0[h].item<double>(), n_after_0);
    s.sink_score.add(h, first_all[h].item<double>(), n_first);
    s.exposure.add(h, exposed[h].item<double>(), double(T));
    s.oldest_key_mass.add(h, oldest_sum[h].item<double>(), n_choosing);
  }
}

// ||v_0|| / median_{j >= 1} ||v_j|| per head; skipped where undefined (T = 1, zero median).
void add_read_norm_ratio(const at::Tensor& norms, LayerProbeSums& s) {
  const int64_t H = norms.size(0), T = norms.size(1);
  if (T < 2) return;
  auto median = at::quantile(norms.narrow(1, 1, T - 1), 0.5, /*dim=*/1);  // (H)
  for (int64_t h = 0; h < H; ++h) {
    const double m = median[h].item<double>();
    if (m > 0.0) s.read_norm_ratio.add(h, norms[h][0].item<double>() / m, 1.0);
  }
}

// Guo et al.'s value-state drain ||v_0|| / median_j ||v_j|| per head, j over all T positions
// (position 0 included, unlike read_norm_ratio); skipped where the median is zero.
void add_value_drain(const at::Tensor& norms, LayerProbeSums& s) {
  auto median = at::quantile(norms, 0.5, /*dim=*/1, /*keepdim=*/false, "linear");  // (H)
  for (int64_t h = 0; h < norms.size(0); ++h) {
    const double m = median[h].item<double>();
    if (m > 0.0) s.value_drain.add(h, norms[h][0].item<double>() / m, 1.0);
  }
}

void add_per_query(const at::Tensor& values, HeadMeans& means) {  // values (H, T) float64
  auto sums = values.sum(1);
  for (int64_t h = 0; h < values.size(0); ++h) means.add(h, sums[h].item<double>(), double(values.size(1)));
}

// One sequence's output gates gamma [T, G] (G = H headwise, H d elementwise, head-major): per head,
// the sum and count of its values, and of those below kOutGateSparseThreshold.
void add_out_gate(const at::Tensor& gamma, int64_t H, LayerProbeSums& s) {
  const auto per_head = gamma.reshape({gamma.size(0), H, -1});  // (T, H, G / H)
  const std::vector<int64_t> over = {0, 2};  // positions and the head's channels
  const auto sums = per_head.sum(over), sparse = (per_head < kOutGateSparseThreshold).to(at::kDouble).sum(over);
  const double n = double(per_head.size(0) * per_head.size(2));
  for (int64_t h = 0; h < H; ++h) {
    s.out_gate_mean.add(h, sums[h].item<double>(), n);
    s.out_gate_sparse_share.add(h, sparse[h].item<double>(), n);
  }
}

}  // namespace

template <>
const NameTable<QuietCutoff>& name_table<QuietCutoff>() {
  static const NameTable<QuietCutoff> table("quiet-read cutoff", {{QuietCutoff::median, "median"}, {QuietCutoff::p25, "p25"}});
  return table;
}

QuietCutoff parse_quiet_cutoff(const std::string& name) { return name_table<QuietCutoff>().parse(name); }

std::string to_string(QuietCutoff cutoff) { return name_table<QuietCutoff>().name(cutoff); }

at::Tensor read_norm_cutoff(const at::Tensor& read_norm, QuietCutoff cutoff) {
  if (!read_norm.defined() || read_norm.dim() != 3)
    throw std::invalid_argument("read_norm_cutoff: read_norm must be [B, H, T]");
  const double q = cutoff == QuietCutoff::median ? 0.5 : 0.25;
  return at::quantile(read_norm.to(at::kDouble), q, /*dim=*/2, /*keepdim=*/false, "linear");  // (B, H)
}

at::Tensor quiet_reads(const at::Tensor& read_norm, QuietCutoff cutoff) {
  return read_norm.to(at::kDouble) < read_norm_cutoff(read_norm, cutoff).unsqueeze(-1);  // (B, H, T)
}

double HeadMeans::mean(int64_t head) const {
  const auto h = size_t(head);
  return count[h] > 0 ? sum[h] / count[h] : std::numeric_limits<double>::quiet_NaN();
}

LayerProbeSums::LayerProbeSums(int64_t n_head)
    : first_key_mass(n_head), sink_score(n_head), phantom_mass(n_head), read_norm_ratio(n_head), exposure(n_head),
      gate_mean(n_head), gate_closed_share(n_head), out_gate_mean(n_head), out_gate_sparse_share(n_head),
      oldest_key_mass(n_head), first_key_chance(n_head), oldest_key_chance(n_head), trigger_key_mass(n_head),
      trigger_key_chance(n_head), other_key_mass(n_head), other_key_chance(n_head), value_drain(n_head),
      residual_peak(1), inf_norm(1), kurtosis(1) {}

at::Tensor trigger_queries(const at::Tensor& idx, const std::vector<int64_t>& tokens, bool sink_token) {
  if (!idx.defined() || idx.dim() != 2) throw std::invalid_argument("trigger_queries: idx must be [B, T]");
  auto hit = torch::zeros(idx.sizes(), idx.options().dtype(at::kBool));
  for (int64_t token : tokens) hit.logical_or_(idx == token);
  if (sink_token) hit = torch::cat({torch::zeros({idx.size(0), 1}, hit.options()), hit}, 1);  // the learned token
  return hit.to(at::kCPU);
}

void accumulate_layer(const LayerProbeInputs& in, LayerProbeSums& s) {
  if (!in.probs.defined() || in.probs.dim() != 4) throw std::invalid_argument("probe: probs must be [B, H, T, T]");
  const int64_t B = in.probs.size(0), H = in.probs.size(1), T = in.probs.size(2);
  require_shape(in.probs, "probs", {B, s.n_head(), T, T});
  require_shape(in.read_norm, "read_norm", {B, H, T});
  if (in.phantom.defined()) require_shape(in.phantom, "phantom", {B, H, T});
  if (in.gate.defined()) require_shape(in.gate, "gate", {B, H, T});
  if (in.out_gate.defined()) {
    const int64_t G = in.out_gate.dim() == 3 ? in.out_gate.size(2) : 0;
    if (G == 0 || G % H != 0) throw std::invalid_argument("probe: out_gate must be [B, T, H] or [B, T, H d]");
    require_shape(in.out_gate, "out_gate", {B, T, G});
  }
  if (in.trigger.defined()) require_shape(in.trigger, "trigger", {B, T});
  torch::NoGradGuard no_grad;
  const auto queries = query_sets(T, in.window);
  for (int64_t b = 0; b < B; ++b) {
    const auto norms = in.read_norm[b].to(at::kDouble);  // (H, T)
    const auto probs = in.probs[b].to(at::kDouble);      // (H, T, T)
    add_attention(probs, norms, in.window, queries, s);
    add_chances(queries, H, s);
    if (in.trigger.defined()) add_trigger_masses(probs.select(2, 0), in.trigger[b], queries, s);
    add_read_norm_ratio(norms, s);
    add_value_drain(norms, s);
    if (in.phantom.defined()) add_per_query(in.phantom[b].to(at::kDouble), s.phantom_mass);
    if (in.gate.defined()) {
      const auto g = in.gate[b].to(at::kDouble);
      add_per_query(g, s.gate_mean);
      add_per_query((g < 0.5).to(at::kDouble), s.gate_closed_share);
    }
    if (in.out_gate.defined()) add_out_gate(in.out_gate[b].to(at::kDouble), H, s);
  }
}

void accumulate_residual(const at::Tensor& x, LayerProbeSums& s) {
  if (!x.defined() || x.dim() != 3) throw std::invalid_argument("probe: the residual stream must be [B, T, d_model]");
  torch::NoGradGuard no_grad;
  for (int64_t b = 0; b < x.size(0); ++b) {
    const auto h = x[b].to(at::kDouble);        // (T, d)
    const auto norms = h.pow(2).sum(1).sqrt();  // (T) ||h_t||
    const double median = at::quantile(norms, 0.5, /*dim=*/std::nullopt, /*keepdim=*/false, "linear").item<double>();
    if (median > 0.0) s.residual_peak.add(0, norms[0].item<double>() / median, 1.0);
    const auto stats = outlier_stats(h);
    s.inf_norm.add(0, stats.inf_norm, 1.0);
    if (std::isfinite(stats.kurtosis)) s.kurtosis.add(0, stats.kurtosis, 1.0);  // n = 1 has no unbiased std
  }
}

}  // namespace attnlab
