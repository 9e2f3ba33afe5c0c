#include "attnlab/probe_measures.h"

#include <set>
#include <stdexcept>

namespace attnlab {

bool ProbeMeasure::applies(const ProbeFeatures& f) const {
  switch (needs) {
    case Needs::any_arm: return true;
    case Needs::sink: return f.sink;
    case Needs::gate: return f.gate;
    case Needs::out_gate: return f.out_gate;
    case Needs::window: return f.windowed();
    case Needs::trigger: return f.triggers;
  }
  return false;
}

ProbeFeatures probe_features(const ModelConfig& cfg) {
  const ArmSpec arm = cfg.arm_spec();
  ProbeFeatures f{arm.sink != SinkKind::none, arm.gate != GateKind::none, arm.out_gate != OutputGate::none, {}};
  if (cfg.has_local_layer())
    for (int64_t l = 0; l < cfg.n_layer; ++l) f.local_layers.push_back(cfg.layer_is_local(l));
  return f;
}

const std::vector<ProbeMeasure>& probe_measure_table() {
  using K = ProbeMeasure::Kind;
  using N = ProbeMeasure::Needs;
  static const std::vector<ProbeMeasure> table = {
      {"first_key_mass", "first-key mass",
       "first_key_mass: mean over sequences and queries i >= 1 of a_i0 (query 0 excluded: it sees only key 0)",
       K::per_head, N::any_arm, true, true, &LayerProbeSums::first_key_mass},
      {"first_key_chance", "first-key chance",
       "first_key_chance: mean over first_key_mass's queries of 1 / |V(i)|, |V(i)| the number of keys query i sees "
       "(the mass uniform attention over those keys puts on key 0; a sink term is no key and does not count)",
       K::per_head, N::any_arm, true, true, &LayerProbeSums::first_key_chance, "", true},
      {"sink_score", "sink score", "sink_score: mean over sequences and queries i >= 0 (every query sees key 0) of a_i0",
       K::per_head, N::any_arm, true, false, &LayerProbeSums::sink_score},
      {"sink_rate", "sink rate", "sink_rate: share of heads with sink_score > 0.3", K::sink_rate, N::any_arm, true, true,
       nullptr},
      {"read_norm_ratio", "read-norm ratio",
       "read_norm_ratio: mean over sequences of ||v_0|| / median_{j>=1} ||v_j|| (per sequence and head)", K::per_head,
       N::any_arm, false, true, &LayerProbeSums::read_norm_ratio},
      {"phantom_mass", "phantom mass",
       "phantom_mass: mean over sequences and queries i >= 0 of p_i = exp(b_h - lse_i); null without a sink",
       K::per_head, N::sink, true, true, &LayerProbeSums::phantom_mass},
      {"exposure", "exposure",
       "exposure: mean over sequences and queries i >= 0 of sum_j a_ij [||v_j|| < p25], p25 = 25th percentile "
       "(linear interpolation) of the sequence's T read norms of that head, position 0 included; the phantom mass "
       "counts in the denominator",
       K::per_head, N::any_arm, true, true, &LayerProbeSums::exposure},
      {"gate_mean", "mean gate", "gate_mean: mean of g_j over all reads; null without a gate", K::per_head, N::gate,
       false, true, &LayerProbeSums::gate_mean},
      {"gate_closed_share", "gates < 0.5", "gate_closed_share: mean of [g_j < 0.5] over all reads; null without a gate",
       K::per_head, N::gate, true, true, &LayerProbeSums::gate_closed_share},
      {"out_gate_mean", "mean output gate",
       "out_gate_mean: mean over sequences, queries i >= 0 and the head's gate values of gamma = sigmoid(x_i W_g + "
       "c_g); null without an output gate",
       K::per_head, N::out_gate, false, true, &LayerProbeSums::out_gate_mean},
      {"out_gate_sparse_share", "output gates < 0.1",
       "out_gate_sparse_share: mean of [gamma < 0.1] over the same values (the gate's sparsity, Qiu et al. 2025); "
       "null without an output gate",
       K::per_head, N::out_gate, true, true, &LayerProbeSums::out_gate_sparse_share},
      {"oldest_key_mass", "oldest-key mass",
       "oldest_key_mass: mean over sequences and queries with at least two visible keys of a_{i,m(i)}, m(i) the "
       "oldest key query i sees (0 on a global layer and with window_keep_first >= 1, else i - W + 1 once i >= W); "
       "windowed models only",
       K::per_head, N::window, true, true, &LayerProbeSums::oldest_key_mass},
      {"oldest_key_chance", "oldest-key chance",
       "oldest_key_chance: mean over oldest_key_mass's queries of 1 / |V(i)|; windowed models only", K::per_head,
       N::window, true, true, &LayerProbeSums::oldest_key_chance, "", true},
      {"trigger_key_mass", "trigger first-key mass",
       "trigger_key_mass: first_key_mass over the queries whose input token is a trigger token (a dormant head puts "
       "little mass on key 0 there); null without trigger tokens",
       K::per_head, N::trigger, true, true, &LayerProbeSums::trigger_key_mass, "", true},
      {"trigger_key_chance", "trigger chance", "trigger_key_chance: first_key_chance over the same trigger queries",
       K::per_head, N::trigger, true, true, &LayerProbeSums::trigger_key_chance, "", true},
      {"other_key_mass", "other first-key mass",
       "other_key_mass: first_key_mass over the other queries (a dormant head puts most mass on key 0 there); null "
       "without trigger tokens",
       K::per_head, N::trigger, true, true, &LayerProbeSums::other_key_mass, "", true},
      {"other_key_chance", "other chance", "other_key_chance: first_key_chance over the same other queries",
       K::per_head, N::trigger, true, true, &LayerProbeSums::other_key_chance, "", true},
      {"value_drain", "value drain",
       "value_drain: mean over sequences of ||v_0|| / median_j ||v_j||, j over all T positions (position 0 "
       "included; zero medians skipped): the value-state drain of Guo et al. 2024",
       K::per_head, N::any_arm, false, true, &LayerProbeSums::value_drain, "", true},
      {"residual_peak", "residual peak",
       "residual_peak: per layer, mean over sequences of ||h_0|| / median_t ||h_t||, h the residual stream after the "
       "block (zero medians skipped): the residual-state peak of Guo et al. 2024; model: mean over layers",
       K::per_layer, N::any_arm, false, true, &LayerProbeSums::residual_peak, "", true},
      {"inf_norm", "inf-norm",
       "inf_norm: per layer, mean over sequences of max |x| over the T x d values x of the block's output "
       "(Bondarenko et al. 2023); model: mean over layers",
       K::per_layer, N::any_arm, false, true, &LayerProbeSums::inf_norm, "", true},
      {"max_inf_norm", "max inf-norm", "max_inf_norm: model only, the largest layer inf_norm", K::layer_max,
       N::any_arm, false, true, nullptr, "inf_norm", true},
      {"kurtosis", "kurtosis",
       "kurtosis: per layer, mean over sequences of mean((x - mu)^4) / (std^4 + 1e-6) over the same T x d values, "
       "std unbiased (3 for Gaussian values; Bondarenko et al. 2023); model: mean over layers",
       K::per_layer, N::any_arm, false, true, &LayerProbeSums::kurtosis, "", true},
      {"max_kurtosis", "max kurtosis", "max_kurtosis: model only, the largest layer kurtosis", K::layer_max,
       N::any_arm, false, true, nullptr, "kurtosis", true},
  };
  return table;
}

size_t probe_measure_index(const std::string& name) {
  const auto& table = probe_measure_table();
  std::string known;
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].name == name) return i;
    known += (known.empty() ? "" : ", ") + table[i].name;
  }
  throw std::invalid_argument("unknown probe measure '" + name + "'; known: " + known);
}

const ProbeMeasure& probe_measure(const std::string& name) { return probe_measure_table()[probe_measure_index(name)]; }

bool averages_queries_seeing_key0(const ProbeMeasure& measure) {
  static const std::set<std::string> names = {"first_key_mass",   "first_key_chance",   "sink_score",
                                              "sink_rate",        "trigger_key_mass",   "trigger_key_chance",
                                              "other_key_mass",   "other_key_chance"};
  return names.count(measure.name) > 0;
}

MeasureValues::MeasureValues() : values(probe_measure_table().size()) {}

MeasureValue& MeasureValues::operator[](const std::string& measure) { return values.at(probe_measure_index(measure)); }

const MeasureValue& MeasureValues::operator[](const std::string& measure) const {
  return values.at(probe_measure_index(measure));
}

const std::vector<MeasureValue>& ProbeLayerSummary::head_values(const std::string& measure) const {
  const size_t i = probe_measure_index(measure);
  if (probe_measure_table()[i].kind != ProbeMeasure::Kind::per_head)
    throw std::invalid_argument("probe measure '" + measure + "' has no per-head values");
  return heads.at(i);
}

}  // namespace attnlab
