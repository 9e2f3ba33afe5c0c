#include "attnlab/probe_measures.h"

#include <stdexcept>

namespace attnlab {

bool ProbeMeasure::applies(bool has_sink, bool has_gate) const {
  switch (needs) {
    case Needs::any_arm: return true;
    case Needs::sink: return has_sink;
    case Needs::gate: return has_gate;
  }
  return false;
}

const std::vector<ProbeMeasure>& probe_measure_table() {
  using K = ProbeMeasure::Kind;
  using N = ProbeMeasure::Needs;
  static const std::vector<ProbeMeasure> table = {
      {"first_key_mass", "first-key mass",
       "first_key_mass: mean over sequences and queries i >= 1 of a_i0 (query 0 excluded: it sees only key 0)",
       K::per_head, N::any_arm, true, true, &LayerProbeSums::first_key_mass},
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
  };
  return table;
}

const ProbeMeasure& probe_measure(const std::string& name) {
  std::string known;
  for (const auto& m : probe_measure_table()) {
    if (m.name == name) return m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  throw std::invalid_argument("unknown probe measure '" + name + "'; known: " + known);
}

}  // namespace attnlab
