// SPEC section 3's paired differences, the rule that forms a pair (same tier: the caller's group;
// same seed, same validation data, every run finished), and Holm's adjustment over one group's table.
#include <fmt/format.h>

#include <map>
#include <set>

#include "attnlab/report.h"

namespace attnlab {
namespace {

Contrast gain(const std::string& id, const std::string& quantity, const std::string& arm) {
  return {id, quantity, "L(baseline) - L(" + arm + ")", {{"baseline", +1}, {arm, -1}}};
}

// gain(sink_logit) + gain(gate) - gain(combo) with gains against baseline:
// (B - S) + (B - G) - (B - C) = B - S - G + C.
Contrast overlap(const std::string& id, const std::string& quantity, const std::string& gate, const std::string& combo) {
  return {id, quantity, "gain(sink_logit) + gain(" + gate + ") - gain(" + combo + ")",
          {{"baseline", +1}, {"sink_logit", -1}, {gate, -1}, {combo, +1}}};
}

// The runs of `arm` finished at `seed` (normally one).
const RunRecord* finished_run(const std::vector<const RunRecord*>& runs, const std::string& arm, uint64_t seed) {
  for (const auto* r : runs)
    if (r->arm == arm && r->seed == seed && r->finished()) return r;
  return nullptr;
}

}  // namespace

PairedQuantity final_loss_quantity() {
  return {"final validation loss", "validation data",
          [](const RunRecord& r) -> std::optional<double> { return r.final_val_loss(); },
          [](const RunRecord& r) {
            return fmt::format("val_fingerprint {}, {} val tokens", r.val_fingerprint(), r.val_tokens());
          }};
}

PairedQuantity domain_loss_quantity(bool trigger) {
  auto quantity = final_loss_quantity();
  quantity.name = trigger ? "val_loss_trigger" : "val_loss_other";
  quantity.value = [trigger](const RunRecord& r) { return r.final_domain_loss(trigger); };
  return quantity;
}

PairedQuantity task_error_quantity(const std::string& task, bool norm) {
  const auto find = [task](const RunRecord& r) -> const TaskAccuracy* {
    const auto it = r.final_tasks().find(task);
    return it == r.final_tasks().end() ? nullptr : &it->second;
  };
  return {"task " + task + (norm ? " acc_norm" : " acc"), "task items",
          [find, norm](const RunRecord& r) -> std::optional<double> {
            const auto* a = find(r);
            if (!a) return std::nullopt;
            return 1.0 - (norm ? a->acc_norm : a->acc);
          },
          [find, task](const RunRecord& r) {
            const auto* a = find(r);
            return a ? fmt::format("task {} fingerprint {:016x}, {} items", task, a->fingerprint, a->n) : std::string();
          }};
}

const std::vector<Contrast>& spec_contrasts() {
  static const std::vector<Contrast> contrasts = {
      {"zero_option", "zero-option increment", "L(baseline) - L(sink_logit)", {{"baseline", +1}, {"sink_logit", -1}}},
      {"filtering_norm", "filtering increment (norm)", "L(sink_logit) - L(combo)", {{"sink_logit", +1}, {"combo", -1}}},
      {"filtering_proj", "filtering increment (projection)", "L(sink_logit) - L(combo2)",
       {{"sink_logit", +1}, {"combo2", -1}}},
      gain("gain_norm_gate", "standalone gain norm_gate", "norm_gate"),
      gain("gain_proj_gate", "standalone gain proj_gate", "proj_gate"),
      gain("gain_off_by_one", "standalone gain off_by_one", "off_by_one"),
      gain("gain_sink_token", "standalone gain sink_token", "sink_token"),
      gain("gain_renorm", "routing control renorm", "renorm"),
      overlap("overlap_norm", "2x2 overlap (norm gate)", "norm_gate", "combo"),
      overlap("overlap_proj", "2x2 overlap (projection gate)", "proj_gate", "combo2"),
      // The output gate (docs/arms.md, "The output gate"): its gain, what it adds to exact abstention,
      // the query-side gate against the key-side filter, and the 2x2 of sink and output gate.
      gain("gain_out_gate", "output-gate gain", "out_gate"),
      gain("gain_out_gate_elem", "output-gate gain (elementwise)", "out_gate_elem"),
      {"out_gate_granularity", "output-gate granularity", "L(out_gate) - L(out_gate_elem)",
       {{"out_gate", +1}, {"out_gate_elem", -1}}},
      {"out_gate_over_sink", "output gate over exact abstention", "L(sink_logit) - L(sink_out_gate)",
       {{"sink_logit", +1}, {"sink_out_gate", -1}}},
      {"out_gate_vs_filter", "output gate vs filter", "L(proj_gate) - L(out_gate)", {{"proj_gate", +1}, {"out_gate", -1}}},
      overlap("overlap_out_gate", "2x2 overlap (sink x output gate)", "out_gate", "sink_out_gate"),
  };
  return contrasts;
}

DifferenceResult pair_contrast(const Contrast& contrast, const std::vector<const RunRecord*>& runs,
                               const PairedQuantity& quantity) {
  DifferenceResult result{contrast, {}, {}, {}, std::nullopt, {}, std::nullopt, std::nullopt};
  std::set<uint64_t> seeds;
  for (const auto* r : runs) seeds.insert(r->seed);
  std::vector<double> values;
  for (uint64_t seed : seeds) {
    std::vector<const RunRecord*> members;
    std::string missing;
    for (const auto& [arm, coef] : contrast.terms) {
      const auto* r = finished_run(runs, arm, seed);
      if (r) members.push_back(r);
      else missing += (missing.empty() ? "" : ", ") + arm;
    }
    if (!missing.empty()) {
      result.skipped.push_back({seed, "no finished run of " + missing});
      continue;
    }
    std::string lacking;
    for (const auto* r : members)
      if (!quantity.value(*r)) lacking += (lacking.empty() ? "" : ", ") + r->arm;
    if (!lacking.empty()) {
      result.skipped.push_back({seed, "no " + quantity.name + " in final.json of " + lacking});
      continue;
    }
    std::string mismatch;
    const auto data0 = quantity.data(*members[0]);
    for (const auto* r : members)
      if (quantity.data(*r) != data0)
        mismatch = fmt::format("different {}: {} ({}) vs {} ({})", quantity.data_name, members[0]->arm, data0, r->arm,
                               quantity.data(*r));
    if (!mismatch.empty()) {
      result.skipped.push_back({seed, mismatch});
      continue;
    }
    double value = 0.0;
    for (size_t k = 0; k < members.size(); ++k) value += contrast.terms[k].second * *quantity.value(*members[k]);
    result.pairs.push_back({seed, value});
    values.push_back(value);
  }
  result.stats = summarize(values);
  result.tests = paired_tests(values, result.stats);
  return result;
}

void adjust_family(std::vector<DifferenceResult>& differences) {
  std::vector<std::optional<double>> p;
  for (const auto& d : differences) p.push_back(d.tests.t ? d.tests.t->p_value : std::nullopt);
  const auto adjusted = holm_adjust(p);
  for (size_t i = 0; i < differences.size(); ++i) differences[i].p_holm = adjusted[i];
}

}  // namespace attnlab
