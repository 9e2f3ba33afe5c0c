// Trained-model and junk-injection figures of paper 000, each with the sentence it comes from. These
// are the paper's scales (124m, 350m), never ours.
#include "attnlab/paper_figures.h"

namespace attnlab {

const std::vector<PaperProbeRow>& paper_probe_rows() {
  // "Trained-model measurements" table, plus "Exposure ... at 124m: baseline 37%; sink_logit 18%
  // (phantom 35%); proj_gate 22%; combo2 19% (phantom 24%); norm_gate 44%."
  static const std::vector<PaperProbeRow> rows = {
      {"124m", "baseline", 0.060, 0.42, std::nullopt, 0.37},
      {"124m", "sink_logit", 0.005, 0.99, 0.35, 0.18},
      {"124m", "norm_gate", 0.037, 0.65, std::nullopt, 0.44},
      {"124m", "proj_gate", std::nullopt, std::nullopt, std::nullopt, 0.22},
      {"124m", "combo2", std::nullopt, std::nullopt, 0.24, 0.19},
      {"350m", "baseline", 0.11, 0.36, std::nullopt, std::nullopt},
      {"350m", "sink_logit", 0.007, 0.98, 0.53, std::nullopt},
  };
  return rows;
}

const std::vector<PaperInjection>& paper_injections() {
  auto at = [](double v) { return PaperFigure{v, v, ""}; };
  static const std::vector<PaperInjection> rows = {
      // "25th-percentile cutoff, structured junk: baseline +0.11 nats at eps 0.4, +2.6 at eps 0.8;
      // sink_logit, proj_gate and the combined arms suffer 1/10 to 1/3 of the baseline's damage at eps 0.4."
      {"124m", "baseline", "structured", "p25", 0.4, at(0.11)},
      {"124m", "baseline", "structured", "p25", 0.8, at(2.6)},
      {"124m", "sink_logit", "structured", "p25", 0.4, {0.011, 0.037, "1/10 to 1/3 of baseline's"}},
      {"124m", "proj_gate", "structured", "p25", 0.4, {0.011, 0.037, "1/10 to 1/3 of baseline's"}},
      {"124m", "combo2", "structured", "p25", 0.4, {0.011, 0.037, "1/10 to 1/3 of baseline's"}},
      // "median cutoff, eps 0.4: structured junk +0.48 nats for baseline, gaussian junk +0.035".
      {"124m", "baseline", "structured", "median", 0.4, at(0.48)},
      {"124m", "baseline", "gaussian", "median", 0.4, at(0.035)},
      // "norm_gate, structured junk: +4.4 at eps 0.8 (baseline 2.6), +6.8 at eps 1.6 (baseline 4.9)".
      {"124m", "norm_gate", "structured", "", 0.8, at(4.4)},
      {"124m", "norm_gate", "structured", "", 1.6, at(6.8)},
      {"124m", "baseline", "structured", "", 1.6, at(4.9)},
      // "proj_gate: random direction +0.05 (eps 0.4), +0.29 (eps 0.8); along its own gate direction +0.56 and +4.8".
      {"124m", "proj_gate", "gaussian", "", 0.4, at(0.05)},
      {"124m", "proj_gate", "gaussian", "", 0.8, at(0.29)},
      {"124m", "proj_gate", "gate_direction", "", 0.4, at(0.56)},
      {"124m", "proj_gate", "gate_direction", "", 0.8, at(4.8)},
      // "350m: combo2 loses 1.1 nats at eps 1.6, baseline 5.9" (kind and cutoff not stated).
      {"350m", "combo2", "", "", 1.6, at(1.1)},
      {"350m", "baseline", "", "", 1.6, at(5.9)},
  };
  return rows;
}

}  // namespace attnlab
