// Writer-row retention as files: JSON (every number), Markdown (for people) and CSV (one row per
// writer row or bias entry).
#include <fmt/format.h>

#include "attnlab/activation_capture.h"
#include "attnlab/writer_retention.h"
#include "common/csv_table.h"
#include "common/json_number.h"

namespace attnlab {
namespace {

nlohmann::json row_json(const RetentionRow& r) {
  return {{"layer", r.layer}, {"writer", r.writer}, {"param", r.param}, {"channel", r.channel}, {"rank", r.rank},
          {"sink_abs_x", r.sink_abs_x}, {"norm", r.norm}, {"G", json_number(r.G)},
          {"G_pre", json_number(r.G_pre)}, {"weight_decay", r.weight_decay}};
}

std::string opt(const std::optional<double>& v, const char* spec = "{:.3e}") {
  return v && std::isfinite(*v) ? fmt::format(fmt::runtime(spec), *v) : "null";
}

std::string rows_csv(const std::vector<RetentionRow>& rows) {
  csv::Table t({"layer", "writer", "param", "channel", "rank", "sink_abs_x", "norm", "G", "G_pre", "weight_decay"});
  for (const auto& r : rows)
    t.row({std::to_string(r.layer), r.writer, r.param, std::to_string(r.channel), std::to_string(r.rank),
           fmt::format("{:.9g}", r.sink_abs_x), fmt::format("{:.9g}", r.norm), opt(r.G, "{:.9g}"),
           opt(r.G_pre, "{:.9g}"), fmt::format("{}", r.weight_decay)});
  return t.str();
}

std::string markdown(const RetentionResult& res, const Provenance& p) {
  std::string out = fmt::format(
      "# Writer-row retention\n\n{} (step {}, arm {}, seed {}); {} batch(es) of {} x {} tokens of {}; mean loss {:.4f} "
      "nats/token; AdamW step {}.\n\nG = -<w, grad_w>/||w||^2, G_pre = -<w, m_hat/(sqrt(v_hat)+eps)>/||w||^2; a row "
      "grows under AdamW when G_pre > lambda. Writer row of channel c = weight[c, :] of the block's attention "
      "out-projection (attn) or MLP down-projection (mlp); layer L = residual after block L.\n\n",
      p.checkpoint, p.step, p.arm, p.run_seed ? std::to_string(*p.run_seed) : "null", res.batches, p.batch_size,
      p.length, p.data, res.mean_loss, res.optimizer_step ? std::to_string(*res.optimizer_step) : "null");
  for (const auto* rows : {&res.weights, &res.biases}) {
    out += rows == &res.weights ? "## Weight rows\n\n" : "\n## Bias entries (not decayed)\n\n";
    out += "| layer | writer | rank | channel | mean abs x_c | norm | G | G_pre | lambda | G_pre > lambda |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& r : *rows)
      out += fmt::format("| {} | {} | {} | {} | {:.3g} | {:.3g} | {} | {} | {} | {} |\n", r.layer, r.writer, r.rank,
                         r.channel, r.sink_abs_x, r.norm, opt(r.G), opt(r.G_pre), r.weight_decay,
                         r.G_pre ? (*r.G_pre > r.weight_decay ? "yes" : "no") : "");
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> retention_files(const RetentionResult& res, const RetentionOptions& options,
                                                   const Provenance& provenance) {
  nlohmann::json weights = nlohmann::json::array(), biases = nlohmann::json::array();
  for (const auto& r : res.weights) weights.push_back(row_json(r));
  for (const auto& r : res.biases) biases.push_back(row_json(r));
  const nlohmann::json doc = {
      {"provenance", to_json(provenance)},
      {"definition", "G = -<w, grad_w>/||w||^2 (grad_w averaged over the batches); G_pre uses "
                     "m_hat/(sqrt(v_hat)+eps) of the checkpoint's AdamW state, null without it; writer row of "
                     "channel c = weight[c, :] of h.<L-1>.attn.c_proj / h.<L-1>.mlp.c_proj"},
      {"layer_convention", kLayerConvention},
      {"top_k", options.top_k},
      {"position", options.position},
      {"mean_loss", res.mean_loss},
      {"optimizer_step", res.optimizer_step ? nlohmann::json(*res.optimizer_step) : nlohmann::json()},
      {"weights", weights},
      {"biases", biases}};
  return {{"retention.json", doc.dump(2) + "\n"},
          {"retention.md", markdown(res, provenance)},
          {"retention_weights.csv", rows_csv(res.weights)},
          {"retention_biases.csv", rows_csv(res.biases)}};
}

}  // namespace attnlab
