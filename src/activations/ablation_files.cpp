// An ablation (and its matched-rms ceiling experiment) as files: JSON, Markdown and CSV.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "attnlab/ablation.h"
#include "attnlab/activation_capture.h"
#include "common/csv_table.h"
#include "common/json_number.h"

namespace attnlab {
namespace {

nlohmann::json pass_json(const AblationPass& p) {
  return {{"loss", p.loss}, {"rms", p.rms}, {"grad_norm", p.grad_norm}, {"product", p.product},
          {"sink_attention", p.sink_attention}};
}

nlohmann::json ceiling_json(const CeilingResult& c, const CeilingOptions& o) {
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& a : c.arms)
    arms.push_back({{"name", a.name}, {"channels", a.channels}, {"growth", a.growth}, {"excess", a.excess},
                    {"out_shift", a.out_shift}, {"removed_share", json_number(a.removed_share)},
                    {"distortion_in", a.distortion_in}, {"distortion_out", a.distortion_out}});
  return {{"layer", o.layer}, {"shift", o.shift}, {"top", o.top}, {"random_k", o.random_k}, {"seed", o.seed},
          {"rms_in", c.rms_in}, {"rms_out", c.rms_out}, {"arms", arms},
          {"definition", "grow channel set S by one factor so that rms(x'_in) = (1+shift) rms(x_in) at the sink "
                         "entering block `layer`; removed share = 1 - (rms(x'_out) - rms(x_out)) / (rms(x'_in) - "
                         "rms(x_in)); distortion = 1 - cos"}};
}

double ratio(double a, double b) { return b != 0.0 ? a / b : std::numeric_limits<double>::quiet_NaN(); }

std::string markdown(const AblationReportInputs& in) {
  const auto& p = in.provenance;
  const auto& r = in.result;
  const auto& o = in.options;
  std::string out = fmt::format(
      "# Ablation at the sink\n\n{} (step {}, arm {}, seed {}); batch {} of {} x {} tokens of {}.\n"
      "Layer {} (the residual stream after {} blocks; 0 = the embedding output), position {}, mode {}, channels {} = {}.\n\n"
      "| pass | loss (nats/token) | rms(x) | grad norm | rms x grad norm |\n|---|---|---|---|---|\n",
      p.checkpoint, p.step, p.arm, p.run_seed ? std::to_string(*p.run_seed) : "null", in.batch, p.batch_size,
      p.length, p.data, o.layer, o.layer, o.position, o.mode.text, o.channels.text, nlohmann::json(r.channels).dump());
  for (const auto* pass : {&r.reference, &r.ablated})
    out += fmt::format("| {} | {:.6f} | {:.4g} | {:.4g} | {:.4g} |\n", pass == &r.reference ? "unablated" : "ablated",
                       pass->loss, pass->rms, pass->grad_norm, pass->product);
  const auto shown = [](double v) { return std::isfinite(v) ? fmt::format("{:.4f}", v) : std::string("n/a"); };
  out += fmt::format("\nLoss change {:+.6f} nats/token; ablated / unablated: rms {}, grad norm {}, product {}.\n",
                     r.ablated.loss - r.reference.loss, shown(ratio(r.ablated.rms, r.reference.rms)),
                     shown(ratio(r.ablated.grad_norm, r.reference.grad_norm)),
                     shown(ratio(r.ablated.product, r.reference.product)));
  out += "\n| block | sink attention, unablated | ablated | change |\n|---|---|---|---|\n";
  for (size_t l = 0; l < r.reference.sink_attention.size(); ++l)
    out += fmt::format("| {} | {:.5f} | {:.5f} | {:+.5f} |\n", l, r.reference.sink_attention[l], r.ablated.sink_attention[l],
                       r.ablated.sink_attention[l] - r.reference.sink_attention[l]);
  if (!in.ceiling) return out + "\nCeiling experiment: none (no block after the last layer).\n";
  const auto& c = *in.ceiling;
  out += fmt::format("\n## Matched-rms ceiling (state entering block {}, rms +{:.0f}%)\n\nrms(x_in) {:.4g}, rms(x_out) {:.4g}.\n\n"
                     "| grown | channels | factor | removed share of the rms excess | 1 - cos in | 1 - cos out |\n"
                     "|---|---|---|---|---|---|\n",
                     in.ceiling_options.layer, 100 * in.ceiling_options.shift, c.rms_in, c.rms_out);
  for (const auto& a : c.arms)
    out += fmt::format("| {} | {} | {:.4g} | {:.1f}% | {:.3e} | {:.3e} |\n", a.name, a.channels.size(), a.growth,
                       100 * a.removed_share, a.distortion_in, a.distortion_out);
  return out;
}

std::string channels_csv(const AblationResult& r) {
  csv::Table t({"channel", "mean_x_unablated", "mean_x_ablated", "mean_abs_grad_unablated", "mean_abs_grad_ablated"});
  for (int64_t c : r.channels)
    t.row({std::to_string(c), fmt::format("{:.9g}", r.reference.state.select(1, c).mean().item<double>()),
           fmt::format("{:.9g}", r.ablated.state.select(1, c).mean().item<double>()),
           fmt::format("{:.9g}", r.reference.grad.select(1, c).abs().mean().item<double>()),
           fmt::format("{:.9g}", r.ablated.grad.select(1, c).abs().mean().item<double>())});
  return t.str();
}

std::string ceiling_csv(const CeilingResult& c) {
  csv::Table t({"arm", "n_channels", "growth", "excess", "out_shift", "removed_share", "distortion_in", "distortion_out"});
  for (const auto& a : c.arms)
    t.row({a.name, std::to_string(a.channels.size()), fmt::format("{:.9g}", a.growth), fmt::format("{:.9g}", a.excess),
           fmt::format("{:.9g}", a.out_shift), fmt::format("{:.9g}", a.removed_share),
           fmt::format("{:.9g}", a.distortion_in), fmt::format("{:.9g}", a.distortion_out)});
  return t.str();
}

}  // namespace

std::map<std::string, std::string> ablation_files(const AblationReportInputs& in) {
  const auto& r = in.result;
  const auto& o = in.options;
  nlohmann::json doc = {{"provenance", to_json(in.provenance)}, {"layer_convention", kLayerConvention},
                        {"batch", in.batch}, {"layer", o.layer}, {"position", o.position}, {"mode", o.mode.text},
                        {"channel_spec", o.channels.text}, {"seed", o.seed}, {"channels", r.channels},
                        {"unablated", pass_json(r.reference)}, {"ablated", pass_json(r.ablated)},
                        {"change", {{"loss", r.ablated.loss - r.reference.loss},
                                    {"rms_ratio", json_number(ratio(r.ablated.rms, r.reference.rms))},
                                    {"grad_norm_ratio", json_number(ratio(r.ablated.grad_norm, r.reference.grad_norm))},
                                    {"product_ratio", json_number(ratio(r.ablated.product, r.reference.product))}}},
                        {"ceiling", in.ceiling ? ceiling_json(*in.ceiling, in.ceiling_options) : nlohmann::json()}};
  std::map<std::string, std::string> files = {{"ablate.json", doc.dump(2) + "\n"},
                                              {"ablate.md", markdown(in)},
                                              {"ablate_channels.csv", channels_csv(r)}};
  if (in.ceiling) files["ceiling.csv"] = ceiling_csv(*in.ceiling);
  return files;
}

}  // namespace attnlab
